"""Pure InfSA: Frobenius-normalised ReLU attention, one Katz/Neumann hop per layer.

Per (sample, head), following the official functional code (docs/ops.md): q and k are
scaled by 1/sqrt(d); A+ = relu(q k^T); the scores are rho * A+ / (||A+||_F + eps), the norm
taken over the whole N x S matrix; the output is scores @ v.

A ``key_padding_mask`` zeroes padded key columns (and, for self-attention, padded query rows)
before the norm, so padding changes neither the norm nor the valid scores.
"""
from typing import Optional

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

from mmlinear.utils.ext_loader import kernel_dtype, kernel_ext, runs_kernel
from .infsa_common import check_infsa_inputs, rho_per_head, rho_vector, scaled_float32


def pure_infsa_scores(q: Tensor,
                      k: Tensor,
                      rho: Tensor,
                      key_padding_mask: Optional[Tensor] = None,
                      eps: float = 1e-6) -> Tensor:
    """Pure InfSA scores ``rho * A+ / (||A+||_F + eps)``.

    Args:
        q (Tensor): (B, H, N, d) queries.
        k (Tensor): (B, H, S, d) keys.
        rho (Tensor): scalar, (1,) or (H,) decay.
        key_padding_mask (Tensor, optional): (B, S) bool, True marks padding.
        eps (float): Stabiliser of the Frobenius normalisation. Defaults to 1e-6.

    Returns:
        Tensor: (B, H, N, S) non-negative scores in float32 (float64 for float64 inputs).
    """
    with torch.autocast(device_type=q.device.type, enabled=False):
        qs, ks = scaled_float32(q, k)
        affinity = torch.relu(qs @ ks.transpose(-2, -1))
        if key_padding_mask is not None:
            affinity = affinity.masked_fill(key_padding_mask[:, None, None, :], 0)
            if q.shape[2] == k.shape[2]:
                affinity = affinity.masked_fill(key_padding_mask[:, None, :, None], 0)
        norm = torch.linalg.matrix_norm(affinity, keepdim=True)
        rho = rho_per_head(rho, q.shape[1], affinity.dtype).unsqueeze(-1)
        return rho * affinity / (norm + eps)


def pure_infsa_reference(q: Tensor,
                         k: Tensor,
                         v: Tensor,
                         rho: Tensor,
                         key_padding_mask: Optional[Tensor] = None,
                         eps: float = 1e-6) -> Tensor:
    """Pure-PyTorch Pure InfSA; the specification every kernel is tested against.

    Materialises the (B, H, N, S) score matrix.

    Args:
        q (Tensor): (B, H, N, d) queries.
        k (Tensor): (B, H, S, d) keys.
        v (Tensor): (B, H, S, d) values.
        rho (Tensor): scalar, (1,) or (H,) decay.
        key_padding_mask (Tensor, optional): (B, S) bool, True marks padding.
        eps (float): Stabiliser of the Frobenius normalisation. Defaults to 1e-6.

    Returns:
        Tensor: (B, H, N, d) in q's dtype.
    """
    check_infsa_inputs(q, k, v, rho, key_padding_mask)
    scores = pure_infsa_scores(q, k, rho, key_padding_mask, eps)
    with torch.autocast(device_type=q.device.type, enabled=False):
        return (scores @ v.to(scores.dtype)).to(q.dtype)


class PureInfSAFunction(Function):
    """Memory-linear Pure InfSA kernel with its hand-written backward.

    Forward and backward take contiguous (B, H, N|S, d) inputs of a kernel dtype, rho as (H,)
    in the accumulation dtype and the mask as (B, S) bool (or None). The forward keeps the
    per-(sample, head) Frobenius norm; the backward recomputes the scores tile by tile and
    reaches the norm through the scalar <dO, O> (``dL/dF = -<dO, O> / (F + eps)``), so no
    N x S tensor exists in either direction.

    Autocast: as :class:`LinearInfSAFunction`, inputs are not cast; the kernels accumulate in
    float32 at least.
    """

    @staticmethod
    @torch.amp.custom_fwd(device_type='cuda')
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, rho: Tensor,
                key_padding_mask: Optional[Tensor], eps: float) -> Tensor:
        out, fro_norm = kernel_ext(q.device).pure_infsa_forward(q, k, v, rho, key_padding_mask, eps)
        ctx.save_for_backward(q, k, v, rho, key_padding_mask, fro_norm, out)
        ctx.eps = eps
        return out

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type='cuda')
    def backward(ctx, grad_out: Tensor) -> tuple:
        q, k, v, rho, key_padding_mask, fro_norm, out = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        B, H, N, d = q.shape
        # <dO, O> per (sample, head) as a batched (1 x Nd) @ (Nd x 1) product: no temporary.
        out_dot = torch.bmm(
            grad_out.reshape(B * H, 1, N * d).to(rho.dtype),
            out.reshape(B * H, N * d, 1).to(rho.dtype)).reshape(B, H)
        grad_q, grad_k, grad_v, grad_rho = kernel_ext(q.device).pure_infsa_backward(
            grad_out, q, k, v, rho, key_padding_mask, fro_norm, out_dot, ctx.eps)
        return grad_q, grad_k, grad_v, grad_rho.sum(0), None, None


def pure_infsa(q: Tensor,
               k: Tensor,
               v: Tensor,
               rho: Tensor,
               key_padding_mask: Optional[Tensor] = None,
               eps: float = 1e-6) -> Tensor:
    """Pure InfSA through the tiled kernel, or the reference where there is none.

    Same arguments and result as :func:`pure_infsa_reference`; with the kernel the memory
    grows linearly with N (no (B, H, N, S) scores, forward or backward).

    Args:
        q (Tensor): (B, H, N, d) queries.
        k (Tensor): (B, H, S, d) keys.
        v (Tensor): (B, H, S, d) values.
        rho (Tensor): scalar, (1,) or (H,) decay.
        key_padding_mask (Tensor, optional): (B, S) bool, True marks padding.
        eps (float): Stabiliser of the Frobenius normalisation. Defaults to 1e-6.

    Returns:
        Tensor: (B, H, N, d) in q's dtype.
    """
    check_infsa_inputs(q, k, v, rho, key_padding_mask)
    if not runs_kernel(q):
        return pure_infsa_reference(q, k, v, rho, key_padding_mask, eps)
    dtype = kernel_dtype(q)
    out = PureInfSAFunction.apply(
        q.to(dtype).contiguous(),
        k.to(dtype).contiguous(),
        v.to(dtype).contiguous(),
        rho_vector(rho, q.shape[1], torch.promote_types(dtype, torch.float32)),
        None if key_padding_mask is None else key_padding_mask.contiguous(), float(eps))
    return out.to(q.dtype)
