"""Running a computation outside autocast, on any device."""
import contextlib
from typing import ContextManager, Optional

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


def autocast_dtype(device_type: str) -> Optional[torch.dtype]:
    """The dtype autocast of ``device_type`` computes its low-precision ops in, where it is
    on in the calling context.

    Args:
        device_type (str): The device type of the tensors, e.g. ``x.device.type``.

    Returns:
        torch.dtype | None: ``torch.get_autocast_dtype(device_type)``, or None where
        autocast is off or the device has none.
    """
    if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return None
