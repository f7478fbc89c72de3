"""Linear layers at inference on the CPU through oneDNN's matmul, the bias fused.

``F.linear`` on the CPU runs the BLAS library PyTorch is built with (MKL for the official
wheels) in float32. MKL takes a slower code path on CPUs that are not Intel's (on the AMD EPYC
of docs/benchmarks.md, half the float32 speed of oneDNN at the shapes of a ViT block), and
adds the bias in a separate pass over the output. oneDNN's matmul, the one PyTorch's compiler
uses for frozen CPU graphs (``torch.ops.mkldnn._linear_pointwise``), adds it in its epilogue.
It has no backward, so it runs only where nothing needs a gradient; ``F.linear`` is its
reference everywhere else.
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from mmlinear.utils.ext_loader import exporting

#: The dtypes oneDNN's matmul takes on the CPU.
ONEDNN_DTYPES = (torch.float32, torch.bfloat16)


def runs_onednn(x: Tensor, *params: Optional[Tensor]) -> bool:
    """Whether :func:`onednn_linear` runs oneDNN for these inputs: CPU tensors of one oneDNN
    dtype (under CPU autocast: float32 or its dtype, which it casts to), no gradient needed,
    eager execution (not compiled, not exported, no dispatch mode such as ``FlopCounterMode``
    watching) and oneDNN enabled.

    Args:
        x (Tensor): The input.
        *params (Tensor, optional): The weight and bias (None is skipped).

    Returns:
        bool: True for oneDNN, False for ``F.linear``.
    """
    tensors = [x] + [t for t in params if t is not None]
    if x.device.type != 'cpu' or any(t.device.type != 'cpu' for t in tensors):
        return False
    dtypes = {t.dtype for t in tensors}
    if torch.is_autocast_enabled('cpu'):
        # Autocast casts a linear layer's float32 inputs to its dtype.
        dtypes.add(torch.get_autocast_dtype('cpu'))
    elif len(dtypes) > 1:
        return False  # F.linear refuses mixed dtypes with a clear error
    if not dtypes <= set(ONEDNN_DTYPES):
        return False
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return False
    if torch.compiler.is_compiling() or exporting() or _get_current_dispatch_mode() is not None:
        return False
    return torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled and hasattr(
        torch.ops.mkldnn, '_linear_pointwise')


def onednn_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``F.linear(x, weight, bias)``, through oneDNN where :func:`runs_onednn`.

    Under CPU autocast the inputs are cast to its dtype first, as autocast casts the inputs
    of ``F.linear``.

    Args:
        x (Tensor): (..., in_features).
        weight (Tensor): (out_features, in_features), any strides.
        bias (Tensor, optional): (out_features, ).

    Returns:
        Tensor: (..., out_features).
    """
    if not runs_onednn(x, weight, bias):
        return F.linear(x, weight, bias)
    if torch.is_autocast_enabled('cpu'):
        dtype = torch.get_autocast_dtype('cpu')
        x, weight = x.to(dtype), weight.to(dtype)
        bias = None if bias is None else bias.to(dtype)
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, 'none', [], '')
