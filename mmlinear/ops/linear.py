"""Linear layers with their activation: ``act(x W^T + b)`` for act in (none, GELU, SwiGLU).

:func:`linear_reference` is the specification (``F.linear``, then ``F.gelu`` or the SwiGLU
gate, exactly what the papers' code computes). At inference on the CPU, :func:`linear` runs
whichever of two backends :func:`~mmlinear.ops.cpu_dispatch.choose` measured faster for
that kind of layer on this machine:

- 'pytorch': the reference itself;
- 'onednn': oneDNN's matmul with the bias and the activation in its epilogue (GELU as the
  erf post-op; the SwiGLU gate ``SiLU(u) * g`` as a matmul for ``u`` with the swish post-op,
  then one for ``g`` whose epilogue multiplies by it), so the hidden activations are written
  once instead of three times.

Both compute the same sums; they differ in rounding only (float32: a different GEMM's
blocking; bfloat16: the epilogue rounds once, after the activation).
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmlinear.utils.precision import autocast_dtype
from .cpu_dispatch import choose, inference_dtype, onednn_available

#: The activations a linear layer can fuse.
ACTIVATIONS = (None, 'gelu', 'swiglu')
#: The backends :func:`linear` chooses from.
BACKENDS = ('pytorch', 'onednn')
#: Rows of the input of the first-use measurement: enough that the hidden activations
#: leave the caches, as in a model (at 2048 rows a fused epilogue gained less than at 3200
#: or 16448, and the choice flipped between runs).
MEASURE_ROWS = 4096


def check_activation(activation: Optional[str], width: Optional[int] = None) -> None:
    """Raise a ValueError for an activation outside :data:`ACTIVATIONS` (naming them), or
    for 'swiglu' on an odd matmul width (the gate takes its two halves).

    Args:
        activation (str, optional): The activation.
        width (int, optional): The matmul's output width, where known.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f'activation must be one of {ACTIVATIONS}, got {activation!r}')
    if activation == 'swiglu' and width is not None and width % 2:
        raise ValueError(f'the SwiGLU gate needs an even out_features (its two halves), got '
                         f'{width}')


def activate(y: Tensor, activation: Optional[str]) -> Tensor:
    """The activation of :func:`linear_reference` on a linear layer's output.

    Args:
        y (Tensor): (..., F), or (..., 2 h) for 'swiglu': the first h features feed the SiLU,
            the last h the linear branch (the released VECA layout of ``fc1``).
        activation (str, optional): One of :data:`ACTIVATIONS`.

    Returns:
        Tensor: (..., F), or (..., h) for 'swiglu'.
    """
    check_activation(activation, y.shape[-1])
    if activation == 'gelu':
        return F.gelu(y)
    if activation == 'swiglu':
        u, g = y.chunk(2, dim=-1)
        return F.silu(u) * g
    return y


def linear_reference(x: Tensor,
                     weight: Tensor,
                     bias: Optional[Tensor] = None,
                     activation: Optional[str] = None) -> Tensor:
    """``activate(F.linear(x, weight, bias), activation)``: the specification of
    :func:`linear`."""
    return activate(F.linear(x, weight, bias), activation)


def _onednn_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor],
                   activation: Optional[str]) -> Tensor:
    """:func:`linear_reference` through oneDNN, the activation fused; inputs of one dtype."""
    fused = torch.ops.mkldnn._linear_pointwise
    if activation == 'swiglu':
        hidden = weight.shape[0] // 2
        b_u, b_g = (None, None) if bias is None else (bias[:hidden], bias[hidden:])
        u = fused(x, weight[:hidden], b_u, 'swish', [], '')
        return fused.binary(x, u, weight[hidden:], b_g, 'mul')
    if activation == 'gelu':
        return fused(x, weight, bias, 'gelu', [], 'none')
    return fused(x, weight, bias, 'none', [], '')


def linear(x: Tensor,
           weight: Tensor,
           bias: Optional[Tensor] = None,
           activation: Optional[str] = None) -> Tensor:
    """``act(x W^T + b)``, through the backend measured fastest at CPU inference.

    Under CPU autocast the inputs are cast to its dtype first, as autocast casts those of
    ``F.linear``.

    Args:
        x (Tensor): (..., in_features).
        weight (Tensor): (out_features, in_features), any strides.
        bias (Tensor, optional): (out_features, ).
        activation (str, optional): One of :data:`ACTIVATIONS`. Defaults to None.

    Returns:
        Tensor: (..., out_features), or (..., out_features // 2) for 'swiglu'.
    """
    check_activation(activation, weight.shape[0])
    dtype = inference_dtype(x, weight, bias)
    if dtype is None or not onednn_available(dtype):
        return linear_reference(x, weight, bias, activation)
    if _backend(dtype, weight.shape[1], weight.shape[0], bias is not None, activation) == 'pytorch':
        return linear_reference(x, weight, bias, activation)
    if autocast_dtype('cpu') is not None:
        x, weight = x.to(dtype), weight.to(dtype)
        bias = None if bias is None else bias.to(dtype)
    return _onednn_linear(x, weight, bias, activation)


def _backend(dtype: torch.dtype, in_features: int, out_features: int, with_bias: bool,
             activation: Optional[str]) -> str:
    """The measured backend of one kind of linear layer (timed on random weights of its
    shape, so that the choice does not depend on the input's row count: a streamed band
    runs what the whole image runs)."""

    def make_candidates() -> dict:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(MEASURE_ROWS, in_features, generator=g).to(dtype)
        weight = (torch.randn(out_features, in_features, generator=g) / in_features**0.5).to(dtype)
        bias = torch.randn(out_features, generator=g).to(dtype) if with_bias else None
        return {
            'pytorch': lambda: linear_reference(x, weight, bias, activation),
            'onednn': lambda: _onednn_linear(x, weight, bias, activation),
        }

    key = ('linear', activation, dtype, in_features, out_features, with_bias)
    return choose(key, BACKENDS, make_candidates)


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, initialisation and state dict keys) with its
    activation, computed by :func:`linear`.

    Args:
        in_features (int): Input width.
        out_features (int): Output width of the matmul (2 h for 'swiglu', whose output is h).
        bias (bool): With a bias. Defaults to True.
        activation (str, optional): One of :data:`ACTIVATIONS`. Defaults to None.
    """

    def __init__(self,
                 in_features: int,
                 out_features: int,
                 bias: bool = True,
                 activation: Optional[str] = None) -> None:
        check_activation(activation, out_features)
        super().__init__(in_features, out_features, bias)
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        """x (Tensor): (..., in_features) -> (..., out_features), halved for 'swiglu'."""
        return linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        return super().extra_repr() + f', activation={self.activation}'
