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
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

from mmlinear.utils.ext_loader import kernel_dtype, require_kernel_ext, runs_kernel
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


# The kernel as a PyTorch operator: the pooled value u (B, H, d) and the statistics its
# backward needs, as aten's native_layer_norm returns (out, mean, rstd). Inputs are contiguous,
# of a kernel dtype, with rho as (H,) in the accumulation dtype (float32, float64 for float64
# inputs), which every output has.
@torch.library.custom_op(
    'mmlinear::linear_infsa',
    mutates_args=(),
    device_types=('cpu', 'cuda'),
    schema='(Tensor q, Tensor k, Tensor v, Tensor rho, Tensor? key_padding_mask, float eps) -> '
    '(Tensor pooled, Tensor central_query, Tensor energy_sum, Tensor score_sum)')
def linear_infsa_op(q: Tensor, k: Tensor, v: Tensor, rho: Tensor,
                    key_padding_mask: Optional[Tensor],
                    eps: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """``torch.ops.mmlinear.linear_infsa``: the fused forward kernel of ``mmlinear._ext``.

    Returns:
        tuple[Tensor]: pooled (B, H, d), central query (B, H, d), query energy sum (B, H) and
        score sum (B, H), in rho's dtype; only ``pooled`` is differentiable.
    """
    ext = require_kernel_ext('linear_infsa', q.device)
    return tuple(ext.linear_infsa_forward(q, k, v, rho, key_padding_mask, eps))


@torch.library.custom_op(
    'mmlinear::linear_infsa_backward',
    mutates_args=(),
    device_types=('cpu', 'cuda'),
    schema='(Tensor grad_pooled, Tensor q, Tensor k, Tensor v, Tensor rho, '
    'Tensor? key_padding_mask, Tensor central_query, Tensor energy_sum, Tensor score_sum, '
    'float eps) -> (Tensor grad_q, Tensor grad_k, Tensor grad_v, Tensor grad_rho)')
def linear_infsa_backward_op(grad_pooled: Tensor, q: Tensor, k: Tensor, v: Tensor, rho: Tensor,
                             key_padding_mask: Optional[Tensor], central_query: Tensor,
                             energy_sum: Tensor, score_sum: Tensor,
                             eps: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """``torch.ops.mmlinear.linear_infsa_backward``: the hand-written backward kernel.

    Returns:
        tuple[Tensor]: grad_q, grad_k, grad_v (shaped and typed as q, k, v) and the per-sample
        grad_rho (B, H) in rho's dtype.
    """
    ext = require_kernel_ext('linear_infsa_backward', q.device)
    return tuple(
        ext.linear_infsa_backward(grad_pooled, q, k, v, rho, key_padding_mask, central_query,
                                  energy_sum, score_sum, eps))


@linear_infsa_op.register_fake
def _linear_infsa_fake(q, k, v, rho, key_padding_mask, eps):
    B, H, _, d = q.shape
    return (q.new_empty((B, H, d), dtype=rho.dtype), q.new_empty(
        (B, H, d), dtype=rho.dtype), q.new_empty(
            (B, H), dtype=rho.dtype), q.new_empty((B, H), dtype=rho.dtype))


@linear_infsa_backward_op.register_fake
def _linear_infsa_backward_fake(grad_pooled, q, k, v, rho, key_padding_mask, central_query,
                                energy_sum, score_sum, eps):
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            torch.empty_like(energy_sum))


def _linear_infsa_setup_context(ctx, inputs, output):
    q, k, v, rho, key_padding_mask, eps = inputs
    _, central_query, energy_sum, score_sum = output
    ctx.mark_non_differentiable(central_query, energy_sum, score_sum)
    ctx.save_for_backward(q, k, v, rho, key_padding_mask, central_query, energy_sum, score_sum)
    ctx.eps = eps


def _linear_infsa_backward(ctx, grad_pooled, *unused_grads):
    q, k, v, rho, key_padding_mask, central_query, energy_sum, score_sum = ctx.saved_tensors
    grad_q, grad_k, grad_v, grad_rho = torch.ops.mmlinear.linear_infsa_backward(
        grad_pooled.contiguous(), q, k, v, rho, key_padding_mask, central_query, energy_sum,
        score_sum, ctx.eps)
    return grad_q, grad_k, grad_v, grad_rho.sum(0), None, None


linear_infsa_op.register_autograd(_linear_infsa_backward, setup_context=_linear_infsa_setup_context)


# FLOPs as FlopCounterMode counts them on the reference (2 per multiply-add of its three
# batched products: the central query, the key scores and the pooled value), so FLOP tables
# do not depend on which path ran.
@register_flop_formula(torch.ops.mmlinear.linear_infsa)
def _linear_infsa_flop(q_shape, k_shape, *args, out_shape=None, **kwargs) -> int:
    B, H, N, d = q_shape
    return 2 * B * H * d * (N + 2 * k_shape[2])


@register_flop_formula(torch.ops.mmlinear.linear_infsa_backward)
def _linear_infsa_backward_flop(grad_shape,
                                q_shape,
                                k_shape,
                                *args,
                                out_shape=None,
                                **kwargs) -> int:
    # Autograd of the reference runs two products per forward product.
    return 2 * _linear_infsa_flop(q_shape, k_shape)


def linear_infsa(q: Tensor,
                 k: Tensor,
                 v: Tensor,
                 rho: Tensor,
                 key_padding_mask: Optional[Tensor] = None,
                 eps: float = 1e-6) -> Tensor:
    """Linear-InfSA through the compiled kernel, or the reference where there is none.

    Same arguments and result as :func:`linear_infsa_reference`. The kernel
    (``torch.ops.mmlinear.linear_infsa``) runs for CPU tensors (and CUDA ones when built with
    CUDA) when ``mmlinear._ext`` is available and no graph is being exported; the output is an
    expanded view of the pooled (B, H, d) value, as the reference's.

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
    if not runs_kernel(q.device.type):
        return linear_infsa_reference(q, k, v, rho, key_padding_mask, eps)
    B, H, N, d = q.shape
    dtype = kernel_dtype(q)
    pooled = torch.ops.mmlinear.linear_infsa(
        q.to(dtype).contiguous(),
        k.to(dtype).contiguous(),
        v.to(dtype).contiguous(), rho_vector(rho, H, torch.promote_types(dtype, torch.float32)),
        None if key_padding_mask is None else key_padding_mask.contiguous(), float(eps))[0]
    return pooled.to(q.dtype).unsqueeze(2).expand(B, H, N, d)
