"""Per-sample depthwise convolution: every (sample, channel) has its own k x k kernel.

WeightFormer's dynamic convolution predicts the kernels from each image, so one batch holds
B * C different depthwise kernels. Stride 1 with same-size zero padding k // 2 (k odd).
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

from mmlinear.utils.ext_loader import kernel_dtype, kernel_ext, runs_kernel


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


class DynamicDWConv2dFunction(Function):
    """Per-sample depthwise convolution kernel with its hand-written backward.

    Takes contiguous x (B, C, H, W), weight (B, C, k, k) and bias (B, C) or None, all of one
    kernel dtype. No autocast casting: the kernels accumulate in float32 at least.
    """

    @staticmethod
    @torch.amp.custom_fwd(device_type='cuda')
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.with_bias = bias is not None
        return kernel_ext(x.device).dynamic_dwconv2d_forward(x, weight, bias)

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type='cuda')
    def backward(ctx, grad_out: Tensor) -> tuple:
        x, weight = ctx.saved_tensors
        grad_x, grad_weight, grad_bias = kernel_ext(x.device).dynamic_dwconv2d_backward(
            grad_out.contiguous(), x, weight)
        return grad_x, grad_weight, grad_bias if ctx.with_bias else None


def dynamic_dwconv2d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """Per-sample depthwise convolution through the kernel, or the reference where none exists.

    Args:
        x (Tensor): (B, C, H, W).
        weight (Tensor): (B, C, k, k), the kernels of each sample, k odd.
        bias (Tensor, optional): (C,) shared by the samples, or (B, C).

    Returns:
        Tensor: (B, C, H, W) in x's dtype (under autocast, in the autocast dtype, as a
        convolution).
    """
    device = x.device.type
    # Devices without autocast (meta, for FLOP counting) cannot be asked about it.
    if (torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device)
            and x.is_floating_point()):
        # A convolution under autocast runs in the low-precision dtype whatever its inputs'
        # dtypes (the predicted kernels often come out of a float32 norm), so do the same.
        dtype = torch.get_autocast_dtype(device)
        x, weight = x.to(dtype), weight.to(dtype)
        bias = None if bias is None else bias.to(dtype)
    check_dwconv_inputs(x, weight, bias)
    if not runs_kernel(x):
        return dynamic_dwconv2d_reference(x, weight, bias)
    dtype = kernel_dtype(x)
    if bias is not None:
        bias = bias.to(dtype).expand(x.shape[:2]).contiguous()
    out = DynamicDWConv2dFunction.apply(
        x.to(dtype).contiguous(),
        weight.to(dtype).contiguous(), bias)
    return out.to(x.dtype)
