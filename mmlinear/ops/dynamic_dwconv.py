"""Per-sample depthwise convolution: every (sample, channel) has its own k x k kernel.

WeightFormer's dynamic convolution predicts the kernels from each image, so one batch holds
B * C different depthwise kernels. Stride 1 with same-size zero padding k // 2 (k odd).
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

from mmlinear.utils.ext_loader import kernel_op, require_kernel_ext, runs_kernel
from mmlinear.utils.precision import autocast_dtype


def check_dwconv_inputs(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> None:
    """Validate a per-sample depthwise convolution call.

    Args:
        x (Tensor): (B, C, H, W).
        weight (Tensor): (B, C, k, k), k odd.
        bias (Tensor, optional): (C,) or (B, C).

    Raises:
        ValueError: If a shape, dtype or device does not match.
    """
    if x.dim() != 4:
        raise ValueError(f'x must be 4-D (B, C, H, W), got shape {tuple(x.shape)}')
    B, C = x.shape[:2]
    if weight.dim() != 4 or weight.shape[:2] != (B, C) or weight.shape[2] != weight.shape[3]:
        raise ValueError(f'weight must have shape (B, C, k, k) = ({B}, {C}, k, k), got '
                         f'{tuple(weight.shape)}')
    if weight.shape[2] % 2 == 0:
        raise ValueError('the kernel side k must be odd for same-size padding, got '
                         f'{weight.shape[2]}')
    tensors = {'x': x, 'weight': weight}
    if bias is not None:
        if bias.shape not in ((C, ), (B, C)):
            raise ValueError(f'bias must have shape (C,) = ({C},) or (B, C) = ({B}, {C}), got '
                             f'{tuple(bias.shape)}')
        tensors['bias'] = bias
    if len({t.device for t in tensors.values()}) > 1:
        raise ValueError('x, weight and bias must be on one device, got '
                         f'{ {name: t.device for name, t in tensors.items()} }')
    if len({t.dtype for t in tensors.values()}) > 1 or not x.dtype.is_floating_point:
        raise ValueError('x, weight and bias must share one floating dtype, got '
                         f'{ {name: t.dtype for name, t in tensors.items()} }')


def dynamic_dwconv2d_reference(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """Pure-PyTorch per-sample depthwise convolution; the specification of the kernel.

    As the reference code: the batch is folded into the channels and one grouped
    convolution with groups = B * C runs every (sample, channel) kernel.

    Args:
        x (Tensor): (B, C, H, W).
        weight (Tensor): (B, C, k, k), the kernels of each sample, k odd.
        bias (Tensor, optional): (C,) shared by the samples, or (B, C).

    Returns:
        Tensor: (B, C, H, W).
    """
    check_dwconv_inputs(x, weight, bias)
    B, C, H, W = x.shape
    if x.numel() == 0:
        # Nothing to convolve; a grouped convolution refuses groups = 0 and maps smaller than
        # the kernel. The empty output still carries x's gradient (also empty).
        return x * 0
    if bias is not None:
        bias = (bias.repeat(B) if bias.dim() == 1 else bias).reshape(B * C)
    out = F.conv2d(
        x.reshape(1, B * C, H, W),
        weight.reshape(B * C, 1, *weight.shape[2:]),
        bias,
        padding=weight.shape[2] // 2,
        groups=B * C)
    return out.reshape(B, C, H, W)


# The kernel as a PyTorch operator. Inputs are of one kernel dtype, with the bias (B, C) or
# None; the weight is contiguous, x contiguous or (on the CPU) channels-last, and the output
# has x's layout.
@kernel_op('dynamic_dwconv2d', '(Tensor x, Tensor weight, Tensor? bias) -> Tensor')
def dynamic_dwconv2d_op(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """``torch.ops.mmlinear.dynamic_dwconv2d``: the forward kernel of ``mmlinear._ext``.

    Returns:
        Tensor: (B, C, H, W), shaped, typed and laid out as x.
    """
    return require_kernel_ext('dynamic_dwconv2d',
                              x.device).dynamic_dwconv2d_forward(x, weight, bias)


@kernel_op(
    'dynamic_dwconv2d_backward', '(Tensor grad_out, Tensor x, Tensor weight) -> '
    '(Tensor grad_x, Tensor grad_weight, Tensor grad_bias)')
def dynamic_dwconv2d_backward_op(grad_out: Tensor, x: Tensor,
                                 weight: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """``torch.ops.mmlinear.dynamic_dwconv2d_backward``: the hand-written backward kernel.

    Returns:
        tuple[Tensor]: grad_x, grad_weight (shaped and typed as x, weight) and the per-sample
        grad_bias (B, C).
    """
    ext = require_kernel_ext('dynamic_dwconv2d_backward', x.device)
    return tuple(ext.dynamic_dwconv2d_backward(grad_out, x, weight))


@dynamic_dwconv2d_op.register_fake
def _dynamic_dwconv2d_fake(x, weight, bias):
    return torch.empty_like(x)


@dynamic_dwconv2d_backward_op.register_fake
def _dynamic_dwconv2d_backward_fake(grad_out, x, weight):
    return torch.empty_like(x), torch.empty_like(weight), x.new_empty(x.shape[:2])


def _dynamic_dwconv2d_setup_context(ctx, inputs, output):
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight)
    ctx.with_bias = bias is not None


def _dynamic_dwconv2d_backward(ctx, grad_out):
    x, weight = ctx.saved_tensors
    # The backward kernel takes contiguous (NCHW) tensors only.
    grad_x, grad_weight, grad_bias = torch.ops.mmlinear.dynamic_dwconv2d_backward(
        grad_out.contiguous(), x.contiguous(), weight)
    return grad_x, grad_weight, grad_bias if ctx.with_bias else None


dynamic_dwconv2d_op.register_autograd(
    _dynamic_dwconv2d_backward, setup_context=_dynamic_dwconv2d_setup_context)


# FLOPs as FlopCounterMode counts the reference's grouped convolution (2 per multiply-add;
# the bias is not counted), so FLOP tables do not depend on which path ran.
@register_flop_formula(torch.ops.mmlinear.dynamic_dwconv2d)
def _dynamic_dwconv2d_flop(x_shape, weight_shape, *args, out_shape=None, **kwargs) -> int:
    B, C, H, W = x_shape
    return 2 * B * C * H * W * weight_shape[2] * weight_shape[3]


@register_flop_formula(torch.ops.mmlinear.dynamic_dwconv2d_backward)
def _dynamic_dwconv2d_backward_flop(grad_shape,
                                    x_shape,
                                    weight_shape,
                                    *args,
                                    out_shape=None,
                                    **kwargs) -> int:
    # grad_x and grad_weight cost one forward each.
    return 2 * _dynamic_dwconv2d_flop(x_shape, weight_shape)


def dynamic_dwconv2d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """Per-sample depthwise convolution through the kernel, or the reference where none exists.

    The kernel is ``torch.ops.mmlinear.dynamic_dwconv2d``; while a graph is being exported the
    reference runs. On the CPU a channels-last x (row-major tokens (B, N, C) seen as a map, as
    :func:`~mmlinear.models.utils.tokens_to_map` lays them out) is convolved in place of
    being transposed, and the output is channels-last too.

    Args:
        x (Tensor): (B, C, H, W).
        weight (Tensor): (B, C, k, k), the kernels of each sample, k odd.
        bias (Tensor, optional): (C,) shared by the samples, or (B, C).

    Returns:
        Tensor: (B, C, H, W) in x's dtype (under autocast, in the autocast dtype, as a
        convolution).
    """
    dtype = autocast_dtype(x.device.type)
    if dtype is not None and x.is_floating_point():
        # A convolution under autocast runs in the low-precision dtype whatever its inputs'
        # dtypes (the predicted kernels often come out of a float32 norm), so do the same.
        x, weight = x.to(dtype), weight.to(dtype)
        bias = None if bias is None else bias.to(dtype)
    check_dwconv_inputs(x, weight, bias)
    if not runs_kernel(x.device.type):
        return dynamic_dwconv2d_reference(x, weight, bias)
    # Both kernels take every floating dtype (the CPU one accumulates half types in float32),
    # and the checks above leave x, weight and bias one dtype: nothing is cast.
    if bias is not None:
        bias = bias.expand(x.shape[:2]).contiguous()
    if x.device.type != 'cpu' or not x.is_contiguous(memory_format=torch.channels_last):
        x = x.contiguous()
    return torch.ops.mmlinear.dynamic_dwconv2d(x, weight.contiguous(), bias)


def depthwise_conv2d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """A depthwise convolution whose kernels every sample shares: ``F.conv2d(x, weight,
    bias, padding=k // 2, groups=C)``.

    Where the extension's kernel runs on the CPU, it is :func:`dynamic_dwconv2d` with the
    shared kernels expanded to every sample (a view): that kernel reads a channels-last map of
    row-major tokens as it is, on which PyTorch's depthwise convolution (oneDNN) took several
    times longer (docs/benchmarks.md). Elsewhere ``F.conv2d``. Training and inference take
    the same path, so a run resumed in another process computes the same sums.

    Args:
        x (Tensor): (B, C, H, W).
        weight (Tensor): (C, 1, k, k), k odd.
        bias (Tensor, optional): (C, ).

    Returns:
        Tensor: (B, C, H, W).
    """
    if x.device.type != 'cpu' or not runs_kernel('cpu'):
        return F.conv2d(x, weight, bias, padding=weight.shape[-1] // 2, groups=weight.shape[0])
    return dynamic_dwconv2d(x, weight.squeeze(1).expand(x.shape[0], -1, -1, -1), bias)
