"""Let mmcv's compiled detection ops run inside CPU bfloat16 autocast.

mmcv's CPU kernels of ``nms`` and ``RoIAlign`` accept float32/float64 only, so a detector
trained with CPU autocast stops at the first RPN proposal filtering ("expected scalar type
Float but found BFloat16"). Under CPU autocast these autograd Functions now compute in float32
and hand back floating results (and input gradients) in the dtype they were given, which is
what their callers expect (mmdet writes RoIAlign's output into a buffer of the features'
dtype). Outside CPU autocast, and on CUDA (whose kernels take half), nothing changes. The
wrappers are installed by :mod:`mmlinear.engine.upstream_shims` when a
:class:`~mmlinear.engine.CPUAmpOptimWrapper` is built.
"""
import functools
from typing import Any, Callable

import torch

# (module, autograd Function) pairs of the mmcv ops that mmdet's two-stage detectors call.
MMCV_FLOAT32_FUNCTIONS = (('mmcv.ops.nms', 'NMSop'), ('mmcv.ops.roi_align', 'RoIAlignFunction'))
LOW_PRECISION = (torch.bfloat16, torch.float16)


def _cast(values: Any, dtype: torch.dtype) -> Any:
    """Cast the floating tensors among ``values`` (a tensor or a tuple) to ``dtype``."""
    if isinstance(values, tuple):
        return tuple(_cast(v, dtype) for v in values)
    if isinstance(values, torch.Tensor) and values.is_floating_point():
        return values.to(dtype)
    return values


def float32_forward(forward: Callable) -> Callable:
    """An autograd Function's ``forward`` that computes in float32 under CPU autocast and
    returns its floating outputs in the dtype of its first input (unchanged elsewhere)."""

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


def float32_backward(backward: Callable) -> Callable:
    """The ``backward`` that goes with :func:`float32_forward`: float32 inside, the caller's
    dtype for the input gradients."""

    @functools.wraps(backward)
    def wrapped(ctx, *grads):
        if ctx.caller_dtype is None:
            return backward(ctx, *grads)
        with torch.autocast(device_type='cpu', enabled=False):
            grads_in = backward(ctx, *_cast(grads, torch.float32))
        return _cast(grads_in, ctx.caller_dtype)

    return wrapped
