"""Running a computation outside autocast, on any device."""
import contextlib
from typing import ContextManager

import torch


def autocast_disabled(device_type: str) -> ContextManager:
    """A context in which autocast of ``device_type`` is off.

    Sums that streamed inference completes over bands must not be rounded to autocast's
    low-precision dtype on the way. Devices without autocast (meta, for FLOP counting) cannot
    even be asked to disable it, and need nothing.

    Args:
        device_type (str): The device type of the tensors, e.g. ``x.device.type``.

    Returns:
        ContextManager: ``torch.autocast(device_type, enabled=False)``, or a no-op context.
    """
    if torch.amp.is_autocast_available(device_type):
        return torch.autocast(device_type=device_type, enabled=False)
    return contextlib.nullcontext()
