"""Autocast questions asked on any device, also inside ``torch.compile``."""
import contextlib
from typing import ContextManager, Dict, Optional

import torch

# ``torch.amp.is_autocast_available`` answered once per device type, outside any compiled
# region: dynamo traces it in torch 2.14 but not in 2.11 (a bare C binding there, which broke
# fullgraph compilation of the ops on the GPU machine's torch), while a lookup in a dict of
# constants traces in every version. The device types the project runs on are answered at
# import, so that a compiled call never meets a missing key.
_AUTOCAST_AVAILABLE: Dict[str, bool] = {
    device_type: torch.amp.is_autocast_available(device_type)
    for device_type in ('cpu', 'cuda', 'meta')
}


def autocast_available(device_type: str) -> bool:
    """Whether ``device_type`` has autocast at all (meta, used for FLOP counting, has none).

    Args:
        device_type (str): The device type of the tensors, e.g. ``x.device.type``.

    Returns:
        bool: ``torch.amp.is_autocast_available(device_type)``.
    """
    available = _AUTOCAST_AVAILABLE.get(device_type)
    if available is None:
        available = torch.amp.is_autocast_available(device_type)
        _AUTOCAST_AVAILABLE[device_type] = available
    return available


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
    if autocast_available(device_type):
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
    if autocast_available(device_type) and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return None
