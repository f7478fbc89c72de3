"""Let mmcv's compiled detection ops run inside CPU bfloat16 autocast.

mmcv's CPU kernels of ``nms`` and ``RoIAlign`` accept float32/float64 only, so a detector
trained with CPU autocast stops at the first RPN proposal filtering ("expected scalar type
Float but found BFloat16"). Under CPU autocast these autograd Functions now compute in float32
and hand back floating results (and input gradients) in the dtype they were given, which is
what their callers expect (mmdet writes RoIAlign's output into a buffer of the features'
dtype). Outside CPU autocast, and on CUDA (whose kernels take half), nothing changes.
"""
import functools
import importlib
from typing import Any, Callable, List

import torch

# (module, autograd Function) pairs of the mmcv ops that mmdet's two-stage detectors call.
MMCV_FLOAT32_FUNCTIONS = (('mmcv.ops.nms', 'NMSop'), ('mmcv.ops.roi_align', 'RoIAlignFunction'))
LOW_PRECISION = (torch.bfloat16, torch.float16)

_patched: List[type] = []


def _cast(values: Any, dtype: torch.dtype) -> Any:
    """Cast the floating tensors among ``values`` (a tensor or a tuple) to ``dtype``."""
    if isinstance(values, tuple):
        return tuple(_cast(v, dtype) for v in values)
    if isinstance(values, torch.Tensor) and values.is_floating_point():
        return values.to(dtype)
    return values


def _float32_forward(forward: Callable) -> Callable:

    @functools.wraps(forward)
    def wrapped(ctx, data: torch.Tensor, *args, **kwargs):
        if not (data.device.type == 'cpu' and torch.is_autocast_enabled('cpu')
                and data.dtype in LOW_PRECISION):
            ctx.caller_dtype = None
            return forward(ctx, data, *args, **kwargs)
        ctx.caller_dtype = data.dtype
        with torch.autocast(device_type='cpu', enabled=False):
            outputs = forward(ctx, data.float(), *_cast(args, torch.float32), **kwargs)
        return _cast(outputs, data.dtype)

    return wrapped


def _float32_backward(backward: Callable) -> Callable:

    @functools.wraps(backward)
    def wrapped(ctx, *grads):
        if ctx.caller_dtype is None:
            return backward(ctx, *grads)
        with torch.autocast(device_type='cpu', enabled=False):
            grads_in = backward(ctx, *_cast(grads, torch.float32))
        return _cast(grads_in, ctx.caller_dtype)

    return wrapped


def run_mmcv_ops_in_float32_under_cpu_autocast() -> None:
    """Make :data:`MMCV_FLOAT32_FUNCTIONS` float32 regions under CPU autocast (idempotent;
    a no-op where mmcv's ops are not installed)."""
    for module_name, function_name in MMCV_FLOAT32_FUNCTIONS:
        try:
            function = getattr(importlib.import_module(module_name), function_name)
        except (ImportError, AttributeError):
            continue
        if function in _patched:
            continue
        function.forward = staticmethod(_float32_forward(function.forward))
        function.backward = staticmethod(_float32_backward(function.backward))
        _patched.append(function)
