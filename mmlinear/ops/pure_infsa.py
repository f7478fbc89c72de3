"""Pure InfSA: Frobenius-normalised ReLU attention, one Katz/Neumann hop per layer.

Per (sample, head), following the official functional code (docs/ops.md): q and k are
scaled by 1/sqrt(d); A+ = relu(q k^T); the scores are rho * A+ / (||A+||_F + eps), the norm
taken over the whole N x S matrix; the output is scores @ v.

A ``key_padding_mask`` zeroes padded key columns (and, for self-attention, padded query rows)
before the norm, so padding changes neither the norm nor the valid scores.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

from mmlinear.utils.ext_loader import kernel_dtype, kernel_op, require_kernel_ext, runs_kernel
from .infsa_common import check_infsa_inputs, rho_per_head, rho_vector, scaled_float32


def pure_infsa_scores(q: Tensor,
                      k: Tensor,
                      rho: Tensor,
                      key_padding_mask: Optional[Tensor] = None,
                      eps: float = 1e-6) -> Tensor:
    """Pure InfSA scores ``rho * A+ / (||A+||_F + eps)``.

    Takes the arguments of :func:`pure_infsa` but the values.

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

    Same arguments and result as :func:`pure_infsa`; materialises the (B, H, N, S) score
    matrix.
    """
    check_infsa_inputs(q, k, v, rho, key_padding_mask)
    scores = pure_infsa_scores(q, k, rho, key_padding_mask, eps)
    with torch.autocast(device_type=q.device.type, enabled=False):
        return (scores @ v.to(scores.dtype)).to(q.dtype)


# The tiled kernel as a PyTorch operator: the output and the per-(sample, head) Frobenius norm
# its backward needs, as aten's native_layer_norm returns (out, mean, rstd). Inputs are
# contiguous, of a kernel dtype, with rho as (H,) in the accumulation dtype (float32, float64
# for float64 inputs), which fro_norm has.
@kernel_op(
    'pure_infsa',
    '(Tensor q, Tensor k, Tensor v, Tensor rho, Tensor? key_padding_mask, float eps) -> '
    '(Tensor out, Tensor fro_norm)')
def pure_infsa_op(q: Tensor, k: Tensor, v: Tensor, rho: Tensor, key_padding_mask: Optional[Tensor],
                  eps: float) -> Tuple[Tensor, Tensor]:
    """``torch.ops.mmlinear.pure_infsa``: the memory-linear forward kernel of ``mmlinear._ext``.

    Returns:
        tuple[Tensor]: out (B, H, N, d) in q's dtype and fro_norm (B, H) in rho's dtype; only
        ``out`` is differentiable.
    """
    ext = require_kernel_ext('pure_infsa', q.device)
    return tuple(ext.pure_infsa_forward(q, k, v, rho, key_padding_mask, eps))


@kernel_op(
    'pure_infsa_backward',
    '(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor rho, Tensor? key_padding_mask, '
    'Tensor fro_norm, Tensor out_dot, float eps) -> '
    '(Tensor grad_q, Tensor grad_k, Tensor grad_v, Tensor grad_rho)')
def pure_infsa_backward_op(grad_out: Tensor, q: Tensor, k: Tensor, v: Tensor, rho: Tensor,
                           key_padding_mask: Optional[Tensor], fro_norm: Tensor, out_dot: Tensor,
                           eps: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """``torch.ops.mmlinear.pure_infsa_backward``: the tiled backward kernel (scores recomputed).

    Returns:
        tuple[Tensor]: grad_q, grad_k, grad_v (shaped and typed as q, k, v) and the per-sample
        grad_rho (B, H) in rho's dtype.
    """
    ext = require_kernel_ext('pure_infsa_backward', q.device)
    return tuple(
        ext.pure_infsa_backward(grad_out, q, k, v, rho, key_padding_mask, fro_norm, out_dot, eps))


@pure_infsa_op.register_fake
def _pure_infsa_fake(q, k, v, rho, key_padding_mask, eps):
    return torch.empty_like(q), q.new_empty(q.shape[:2], dtype=rho.dtype)


@pure_infsa_backward_op.register_fake
def _pure_infsa_backward_fake(grad_out, q, k, v, rho, key_padding_mask, fro_norm, out_dot, eps):
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            torch.empty_like(fro_norm))


def _pure_infsa_setup_context(ctx, inputs, output):
    q, k, v, rho, key_padding_mask, eps = inputs
    out, fro_norm = output
    ctx.mark_non_differentiable(fro_norm)
    ctx.save_for_backward(q, k, v, rho, key_padding_mask, fro_norm, out)
    ctx.eps = eps


def _pure_infsa_backward(ctx, grad_out, unused_grad_fro_norm):
    q, k, v, rho, key_padding_mask, fro_norm, out = ctx.saved_tensors
    grad_out = grad_out.contiguous()
    B, H, N, d = q.shape
    # <dO, O> per (sample, head) as a batched (1 x Nd) @ (Nd x 1) product: no temporary; in
    # the accumulation dtype even under autocast.
    with torch.autocast(device_type=q.device.type, enabled=False):
        out_dot = torch.bmm(
            grad_out.reshape(B * H, 1, N * d).to(rho.dtype),
            out.reshape(B * H, N * d, 1).to(rho.dtype)).reshape(B, H)
    grad_q, grad_k, grad_v, grad_rho = torch.ops.mmlinear.pure_infsa_backward(
        grad_out, q, k, v, rho, key_padding_mask, fro_norm, out_dot, ctx.eps)
    return grad_q, grad_k, grad_v, grad_rho.sum(0), None, None


pure_infsa_op.register_autograd(_pure_infsa_backward, setup_context=_pure_infsa_setup_context)


# FLOPs as FlopCounterMode counts them on the reference (2 per multiply-add of q k^T and of
# the scores times v), so FLOP tables do not depend on which path ran.
@register_flop_formula(torch.ops.mmlinear.pure_infsa)
def _pure_infsa_flop(q_shape, k_shape, *args, out_shape=None, **kwargs) -> int:
    B, H, N, d = q_shape
    return 4 * B * H * N * k_shape[2] * d


@register_flop_formula(torch.ops.mmlinear.pure_infsa_backward)
def _pure_infsa_backward_flop(grad_shape, q_shape, k_shape, *args, out_shape=None, **kwargs) -> int:
    # Autograd of the reference runs two products per forward product (the kernel's tile
    # recomputation is not counted, as FLOP counts of flash attention's backward do not).
    return 2 * _pure_infsa_flop(q_shape, k_shape)


def pure_infsa(q: Tensor,
               k: Tensor,
               v: Tensor,
               rho: Tensor,
               key_padding_mask: Optional[Tensor] = None,
               eps: float = 1e-6) -> Tensor:
    """Pure InfSA through the tiled kernel, or the reference where there is none.

    With the kernel (``torch.ops.mmlinear.pure_infsa``, used unless a graph is being exported)
    the memory grows linearly with N (no (B, H, N, S) scores, forward or backward);
    :func:`pure_infsa_reference` is the specification.

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
    if not runs_kernel(q.device.type):
        return pure_infsa_reference(q, k, v, rho, key_padding_mask, eps)
    dtype = kernel_dtype(q)
    out = torch.ops.mmlinear.pure_infsa(
        q.to(dtype).contiguous(),
        k.to(dtype).contiguous(),
        v.to(dtype).contiguous(),
        rho_vector(rho, q.shape[1], torch.promote_types(dtype, torch.float32)),
        None if key_padding_mask is None else key_padding_mask.contiguous(), float(eps))[0]
    return out.to(q.dtype)
