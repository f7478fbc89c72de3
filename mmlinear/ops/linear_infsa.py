"""Linear-InfSA: one power-iteration step towards the Perron vector, broadcast to all queries.

Per (sample, head), following the official functional code (docs/ops.md):
q and k are scaled by 1/sqrt(d); the query energies e_i = ||q_i|| give weights
w = e / (sum(e) + eps); the central query is q_bar = sum_i w_i q_i; key scores
s_j = relu(q_bar . k_j) are L1-normalised, a = rho * s / (sum(s) + eps); the pooled value
u = sum_j a_j v_j is broadcast to every query position (to N, not S: the reference's
cross-attention shape bug is fixed).

A ``key_padding_mask`` drops padded keys from the scores; for self-attention (N == S) the same
tokens are dropped from the query energies, so padding cannot move the central query.
"""
from typing import Optional

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

from mmlinear.utils.ext_loader import kernel_dtype, kernel_ext, runs_kernel
from .infsa_common import check_infsa_inputs, rho_per_head, rho_vector, scaled_float32


def linear_infsa_key_weights(q: Tensor,
                             k: Tensor,
                             rho: Tensor,
                             key_padding_mask: Optional[Tensor] = None,
                             eps: float = 1e-6) -> Tensor:
    """Linear-InfSA key weights ``a`` (the approximate left Perron vector, times rho).

    Args:
        q (Tensor): (B, H, N, d) queries.
        k (Tensor): (B, H, S, d) keys.
        rho (Tensor): scalar, (1,) or (H,) decay.
        key_padding_mask (Tensor, optional): (B, S) bool, True marks padding.
        eps (float): Stabiliser of both normalisations. Defaults to 1e-6.

    Returns:
        Tensor: (B, H, S) non-negative weights summing to rho (or 0 when every score <= 0),
        in float32 (float64 for float64 inputs).
    """
    with torch.autocast(device_type=q.device.type, enabled=False):
        qs, ks = scaled_float32(q, k)
        energy = qs.norm(dim=-1)  # (B, H, N)
        if key_padding_mask is not None and q.shape[2] == k.shape[2]:
            energy = energy.masked_fill(key_padding_mask[:, None, :], 0)
        weights = energy / (energy.sum(-1, keepdim=True) + eps)
        central_query = torch.einsum('bhn,bhnd->bhd', weights, qs)
        scores = torch.relu(torch.einsum('bhsd,bhd->bhs', ks, central_query))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, :], 0)
        key_weights = scores / (scores.sum(-1, keepdim=True) + eps)
        return rho_per_head(rho, q.shape[1], key_weights.dtype) * key_weights


def linear_infsa_reference(q: Tensor,
                           k: Tensor,
                           v: Tensor,
                           rho: Tensor,
                           key_padding_mask: Optional[Tensor] = None,
                           eps: float = 1e-6) -> Tensor:
    """Pure-PyTorch Linear-InfSA; the specification every kernel is tested against.

    Args:
        q (Tensor): (B, H, N, d) queries.
        k (Tensor): (B, H, S, d) keys.
        v (Tensor): (B, H, S, d) values.
        rho (Tensor): scalar, (1,) or (H,) decay.
        key_padding_mask (Tensor, optional): (B, S) bool, True marks padding.
        eps (float): Stabiliser of both normalisations. Defaults to 1e-6.

    Returns:
        Tensor: (B, H, N, d) in q's dtype; every query row holds the same pooled value.
    """
    check_infsa_inputs(q, k, v, rho, key_padding_mask)
    key_weights = linear_infsa_key_weights(q, k, rho, key_padding_mask, eps)
    with torch.autocast(device_type=q.device.type, enabled=False):
        pooled = torch.einsum('bhs,bhsd->bhd', key_weights, v.to(key_weights.dtype))
    B, H, N, d = q.shape
    return pooled.to(q.dtype).unsqueeze(2).expand(B, H, N, d)


class LinearInfSAFunction(Function):
    """Fused Linear-InfSA kernel with its hand-written backward.

    Forward and backward take contiguous (B, H, N|S, d) inputs of a kernel dtype, rho as (H,)
    and the mask as (B, S) bool (or None); the result is the pooled value (B, H, d) in the
    accumulation dtype (float32, float64 for float64), which the caller broadcasts to N.

    Autocast: ``custom_fwd`` without ``cast_inputs``. The kernels take half types as they are
    and accumulate every norm and sum in float32 (float64 for float64), so casting the inputs
    would only cost bandwidth; ``custom_bwd`` runs the backward under the forward's autocast
    state.
    """

    @staticmethod
    @torch.amp.custom_fwd(device_type='cuda')
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, rho: Tensor,
                key_padding_mask: Optional[Tensor], eps: float) -> Tensor:
        ext = kernel_ext(q.device)
        pooled, central, energy_sum, score_sum = ext.linear_infsa_forward(
            q, k, v, rho, key_padding_mask, eps)
        ctx.save_for_backward(q, k, v, rho, key_padding_mask, central, energy_sum, score_sum)
        ctx.eps = eps
        return pooled

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type='cuda')
    def backward(ctx, grad_pooled: Tensor) -> tuple:
        q, k, v, rho, key_padding_mask, central, energy_sum, score_sum = ctx.saved_tensors
        grad_q, grad_k, grad_v, grad_rho = kernel_ext(q.device).linear_infsa_backward(
            grad_pooled.contiguous(), q, k, v, rho, key_padding_mask, central, energy_sum,
            score_sum, ctx.eps)
        return grad_q, grad_k, grad_v, grad_rho.sum(0), None, None


def linear_infsa(q: Tensor,
                 k: Tensor,
                 v: Tensor,
                 rho: Tensor,
                 key_padding_mask: Optional[Tensor] = None,
                 eps: float = 1e-6) -> Tensor:
    """Linear-InfSA through the compiled kernel, or the reference where there is none.

    Same arguments and result as :func:`linear_infsa_reference`. The kernel runs for CPU
    tensors (and CUDA ones when built with CUDA) when ``mmlinear._ext`` is available; the
    output is an expanded view of the pooled (B, H, d) value, as the reference's.

    Args:
        q (Tensor): (B, H, N, d) queries.
        k (Tensor): (B, H, S, d) keys.
        v (Tensor): (B, H, S, d) values.
        rho (Tensor): scalar, (1,) or (H,) decay.
        key_padding_mask (Tensor, optional): (B, S) bool, True marks padding.
        eps (float): Stabiliser of both normalisations. Defaults to 1e-6.

    Returns:
        Tensor: (B, H, N, d) in q's dtype.
    """
    check_infsa_inputs(q, k, v, rho, key_padding_mask)
    if not runs_kernel(q):
        return linear_infsa_reference(q, k, v, rho, key_padding_mask, eps)
    B, H, N, d = q.shape
    dtype = kernel_dtype(q)
    pooled = LinearInfSAFunction.apply(
        q.to(dtype).contiguous(),
        k.to(dtype).contiguous(),
        v.to(dtype).contiguous(), rho_vector(rho, H, torch.promote_types(dtype, torch.float32)),
        None if key_padding_mask is None else key_padding_mask.contiguous(), float(eps))
    return pooled.to(q.dtype).unsqueeze(2).expand(B, H, N, d)
