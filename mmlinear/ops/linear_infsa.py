"""Linear-InfSA: one power-iteration step towards the Perron vector, broadcast to all queries.

Per (sample, head), following the official functional code (docs/ops.md): q and k are
scaled by 1/sqrt(d); the query energies e_i = ||q_i|| give weights w = e / (sum(e) + eps);
the central query is q_bar = sum_i w_i q_i; key scores s_j = relu(q_bar . k_j) are
L1-normalised, a = rho * s / (sum(s) + eps) (:func:`linear_infsa_key_weights`); the pooled
value sum_j a_j v_j is broadcast to every query.

Since v_j = W x_j + b is linear in the attention input x_j, the layer pools the inputs instead
of the values (``InfSAAttention``), so Linear-InfSA reduces a sequence to two fixed-size sums,
each one pass over the tokens, the second needing the first:

1. :func:`linear_infsa_query_sums`: ``sum_i e_i q_i`` and ``sum_i e_i`` (the central query is
   their ratio);
2. :func:`linear_infsa_key_pool`: ``sum_j s_j x_j`` and ``sum_j s_j`` for a central query.

Both run a compiled kernel (``torch.ops.mmlinear.*``, with autograd) or their PyTorch
reference, and both add over bands of tokens, which is how the streamed backbones use them.
A padding mask drops padded tokens from both sums.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

from mmlinear.utils.deprecation import renamed_arguments
from mmlinear.utils.ext_loader import kernel_dtype, kernel_op, require_kernel_ext, runs_kernel
from .infsa_common import check_infsa_inputs, rho_per_head, scale_float32, scaled_float32


def linear_infsa_key_weights(q: Tensor,
                             k: Tensor,
                             rho: Tensor,
                             key_padding_mask: Optional[Tensor] = None,
                             eps: float = 1e-6) -> Tensor:
    """Linear-InfSA key weights ``a`` (the approximate left Perron vector, times rho).

    The explicit form, for attention maps and attention dropout; the layer's fast path reaches
    ``sum_j a_j x_j`` through the two sums instead.

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
    check_infsa_inputs(q, k, None, rho, key_padding_mask)
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


def _check_heads(name: str, t: Tensor) -> None:
    if t.dim() != 4 or t.shape[-1] == 0 or not t.dtype.is_floating_point:
        raise ValueError(f'{name} must be a floating (B, H, n, d) tensor with d >= 1, got '
                         f'{t.dtype} {tuple(t.shape)}')


def _check_mask(mask: Optional[Tensor], like: Tensor) -> None:
    expected = (like.shape[0], like.shape[2])
    if mask is not None and (mask.dtype != torch.bool or tuple(mask.shape) != expected):
        raise ValueError(
            f'key_padding_mask must be a bool tensor of shape (B, n) = {expected}, got '
            f'{mask.dtype} {tuple(mask.shape)}')
    if mask is not None and mask.device != like.device:
        raise ValueError(f'key_padding_mask is on {mask.device}, the tokens on {like.device}')


def _rows(t: Tensor, dtype: torch.dtype) -> Tensor:
    """``t`` in ``dtype`` with a contiguous last dimension (the kernels read any other
    strides, e.g. the transposed (B, n, H, d) projection outputs, without a copy)."""
    t = t.to(dtype)
    return t if t.stride(-1) == 1 or t.shape[-1] == 1 else t.contiguous()


def _mask(mask: Optional[Tensor]) -> Optional[Tensor]:
    return None if mask is None else mask.contiguous()


@renamed_arguments(padding_mask='key_padding_mask')
def linear_infsa_query_sums_reference(q: Tensor,
                                      key_padding_mask: Optional[Tensor] = None
                                      ) -> Tuple[Tensor, Tensor]:
    """Pure-PyTorch query sums; the specification the kernel is tested against. Same
    arguments and result as :func:`linear_infsa_query_sums`."""
    with torch.autocast(device_type=q.device.type, enabled=False):
        qs = scale_float32(q)
        energy = qs.norm(dim=-1)  # (B, H, n)
        if key_padding_mask is not None:
            energy = energy.masked_fill(key_padding_mask[:, None, :], 0)
        return torch.einsum('bhn,bhnd->bhd', energy, qs), energy.sum(-1)


@renamed_arguments(padding_mask='key_padding_mask')
def linear_infsa_key_pool_reference(
        central_query: Tensor,
        k: Tensor,
        x: Tensor,
        key_padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Pure-PyTorch key pooling; the specification the kernel is tested against. Same
    arguments and result as :func:`linear_infsa_key_pool`."""
    with torch.autocast(device_type=k.device.type, enabled=False):
        ks = scale_float32(k)
        scores = torch.relu(torch.einsum('bhnd,bhd->bhn', ks, central_query.to(ks.dtype)))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, :], 0)
        return torch.bmm(scores, x.to(scores.dtype)), scores.sum(-1)


@kernel_op('linear_infsa_query_sums',
           '(Tensor q, Tensor? key_padding_mask) -> (Tensor weighted_queries, Tensor energy_sum)')
def linear_infsa_query_sums_op(q: Tensor,
                               key_padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """``torch.ops.mmlinear.linear_infsa_query_sums``: the query-pass kernel of
    ``mmlinear._ext``, one read of q.

    Returns:
        tuple[Tensor, Tensor]: (B, H, d) and (B, H) in the accumulation dtype.
    """
    ext = require_kernel_ext('linear_infsa_query_sums', q.device)
    return tuple(ext.linear_infsa_query_sums_forward(q, key_padding_mask))


@kernel_op(
    'linear_infsa_query_sums_backward',
    '(Tensor grad_queries, Tensor grad_energy, Tensor q, Tensor? key_padding_mask) -> Tensor')
def linear_infsa_query_sums_backward_op(grad_queries: Tensor, grad_energy: Tensor, q: Tensor,
                                        key_padding_mask: Optional[Tensor]) -> Tensor:
    """``torch.ops.mmlinear.linear_infsa_query_sums_backward``: grad_q, shaped and typed as q."""
    ext = require_kernel_ext('linear_infsa_query_sums_backward', q.device)
    return ext.linear_infsa_query_sums_backward(grad_queries, grad_energy, q, key_padding_mask)


@kernel_op(
    'linear_infsa_key_pool',
    '(Tensor central_query, Tensor k, Tensor x, Tensor? key_padding_mask) -> '
    '(Tensor weighted_inputs, Tensor score_sum)')
def linear_infsa_key_pool_op(central_query: Tensor, k: Tensor, x: Tensor,
                             key_padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """``torch.ops.mmlinear.linear_infsa_key_pool``: the key-pass kernel of ``mmlinear._ext``,
    one read of k and x, no (B, H, n) scores.

    Returns:
        tuple[Tensor, Tensor]: (B, H, C) and (B, H) in the accumulation dtype.
    """
    ext = require_kernel_ext('linear_infsa_key_pool', k.device)
    return tuple(ext.linear_infsa_key_pool_forward(central_query, k, x, key_padding_mask))


@kernel_op(
    'linear_infsa_key_pool_backward',
    '(Tensor grad_inputs, Tensor grad_scores, Tensor central_query, Tensor k, Tensor x, '
    'Tensor? key_padding_mask) -> (Tensor grad_central_query, Tensor grad_k, Tensor grad_x)')
def linear_infsa_key_pool_backward_op(
        grad_inputs: Tensor, grad_scores: Tensor, central_query: Tensor, k: Tensor, x: Tensor,
        key_padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    """``torch.ops.mmlinear.linear_infsa_key_pool_backward``: the scores recomputed.

    Returns:
        tuple[Tensor]: grad of the central query (B, H, d), grad_k and grad_x (shaped and
        typed as k and x).
    """
    ext = require_kernel_ext('linear_infsa_key_pool_backward', k.device)
    return tuple(
        ext.linear_infsa_key_pool_backward(grad_inputs, grad_scores, central_query, k, x,
                                           key_padding_mask))


def _acc_dtype(t: Tensor) -> torch.dtype:
    return torch.promote_types(t.dtype, torch.float32)


@linear_infsa_query_sums_op.register_fake
def _query_sums_fake(q, key_padding_mask):
    B, H, _, d = q.shape
    return q.new_empty((B, H, d), dtype=_acc_dtype(q)), q.new_empty((B, H), dtype=_acc_dtype(q))


@linear_infsa_query_sums_backward_op.register_fake
def _query_sums_backward_fake(grad_queries, grad_energy, q, key_padding_mask):
    return torch.empty_like(q)


@linear_infsa_key_pool_op.register_fake
def _key_pool_fake(central_query, k, x, key_padding_mask):
    B, H = k.shape[:2]
    return (k.new_empty((B, H, x.shape[-1]),
                        dtype=_acc_dtype(k)), k.new_empty((B, H), dtype=_acc_dtype(k)))


@linear_infsa_key_pool_backward_op.register_fake
def _key_pool_backward_fake(grad_inputs, grad_scores, central_query, k, x, key_padding_mask):
    return torch.empty_like(central_query), torch.empty_like(k), torch.empty_like(x)


def _grad_or_zeros(grad: Optional[Tensor], like: Tensor) -> Tensor:
    return torch.zeros_like(like) if grad is None else grad.contiguous()


def _query_sums_setup_context(ctx, inputs, output):
    q, key_padding_mask = inputs
    ctx.save_for_backward(q, key_padding_mask)


def _query_sums_backward(ctx, grad_queries, grad_energy):
    q, key_padding_mask = ctx.saved_tensors
    B, H, _, d = q.shape
    acc = _acc_dtype(q)
    grad_q = torch.ops.mmlinear.linear_infsa_query_sums_backward(
        _grad_or_zeros(grad_queries, q.new_empty((B, H, d), dtype=acc)),
        _grad_or_zeros(grad_energy, q.new_empty((B, H), dtype=acc)), q, key_padding_mask)
    return grad_q, None


def _key_pool_setup_context(ctx, inputs, output):
    central_query, k, x, key_padding_mask = inputs
    ctx.save_for_backward(central_query, k, x, key_padding_mask)


def _key_pool_backward(ctx, grad_inputs, grad_scores):
    central_query, k, x, key_padding_mask = ctx.saved_tensors
    B, H = k.shape[:2]
    acc = _acc_dtype(k)
    return (*torch.ops.mmlinear.linear_infsa_key_pool_backward(
        _grad_or_zeros(grad_inputs, k.new_empty((B, H, x.shape[-1]), dtype=acc)),
        _grad_or_zeros(grad_scores, k.new_empty(
            (B, H), dtype=acc)), central_query, k, x, key_padding_mask), None)


linear_infsa_query_sums_op.register_autograd(
    _query_sums_backward, setup_context=_query_sums_setup_context)
linear_infsa_key_pool_op.register_autograd(
    _key_pool_backward, setup_context=_key_pool_setup_context)


# FLOPs as FlopCounterMode counts them on the references (2 per multiply-add of their batched
# products; the norms are not counted), so FLOP tables do not depend on which path ran.
@register_flop_formula(torch.ops.mmlinear.linear_infsa_query_sums)
def _query_sums_flop(q_shape, *args, out_shape=None, **kwargs) -> int:
    B, H, n, d = q_shape
    return 2 * B * H * n * d


@register_flop_formula(torch.ops.mmlinear.linear_infsa_key_pool)
def _key_pool_flop(central_shape, k_shape, x_shape, *args, out_shape=None, **kwargs) -> int:
    B, H, n, d = k_shape
    return 2 * B * H * n * (d + x_shape[-1])


# Autograd of a reference runs two products per forward product.
@register_flop_formula(torch.ops.mmlinear.linear_infsa_query_sums_backward)
def _query_sums_backward_flop(grad_queries_shape,
                              grad_energy_shape,
                              q_shape,
                              *args,
                              out_shape=None,
                              **kwargs) -> int:
    return 2 * _query_sums_flop(q_shape)


@register_flop_formula(torch.ops.mmlinear.linear_infsa_key_pool_backward)
def _key_pool_backward_flop(grad_inputs_shape,
                            grad_scores_shape,
                            central_shape,
                            k_shape,
                            x_shape,
                            *args,
                            out_shape=None,
                            **kwargs) -> int:
    return 2 * _key_pool_flop(central_shape, k_shape, x_shape)


@renamed_arguments(padding_mask='key_padding_mask')
def linear_infsa_query_sums(q: Tensor,
                            key_padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Linear-InfSA's first pass: the energy-weighted query sum and the energy sum.

    Runs ``torch.ops.mmlinear.linear_infsa_query_sums`` where ``mmlinear._ext`` has a kernel
    for q's device and no graph is being exported, else
    :func:`linear_infsa_query_sums_reference`. Sums over bands of tokens add up to the sums
    over the whole sequence.

    Args:
        q (Tensor): (B, H, n, d) queries, before the 1/sqrt(d) scaling.
        key_padding_mask (Tensor, optional): (B, n) bool, True on padded tokens
            (deprecated spelling ``padding_mask``).

    Returns:
        tuple[Tensor, Tensor]: ``sum_i e_i s_i`` (B, H, d) and ``sum_i e_i`` (B, H), with
        ``s_i = q_i / sqrt(d)`` and ``e_i = ||s_i||``, in float32 (float64 for float64).
    """
    _check_heads('q', q)
    _check_mask(key_padding_mask, q)
    if not runs_kernel(q.device.type):
        return linear_infsa_query_sums_reference(q, key_padding_mask)
    return torch.ops.mmlinear.linear_infsa_query_sums(
        _rows(q, kernel_dtype(q)), _mask(key_padding_mask))


@renamed_arguments(padding_mask='key_padding_mask')
def linear_infsa_key_pool(central_query: Tensor,
                          k: Tensor,
                          x: Tensor,
                          key_padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Linear-InfSA's second pass: the score-weighted sum of the attention inputs.

    Runs ``torch.ops.mmlinear.linear_infsa_key_pool`` where ``mmlinear._ext`` has a kernel for
    the inputs' device and no graph is being exported, else
    :func:`linear_infsa_key_pool_reference`. Sums over bands of tokens add up.

    Args:
        central_query (Tensor): (B, H, d) central query in the scaled space (the ratio of the
            two query sums, with eps).
        k (Tensor): (B, H, n, d) keys, before the 1/sqrt(d) scaling.
        x (Tensor): (B, n, C) the attention inputs of the same tokens.
        key_padding_mask (Tensor, optional): (B, n) bool, True on padded tokens
            (deprecated spelling ``padding_mask``).

    Returns:
        tuple[Tensor, Tensor]: ``sum_j s_j x_j`` (B, H, C) and ``sum_j s_j`` (B, H), with
        ``s_j = relu(q_bar . k_j / sqrt(d))``, in float32 (float64 for float64).
    """
    _check_heads('k', k)
    _check_mask(key_padding_mask, k)
    B, H, n, d = k.shape
    if central_query.shape != (B, H, d) or x.dim() != 3 or x.shape[:2] != (B, n):
        raise ValueError(f'expected central_query (B, H, d) = {(B, H, d)} and x (B, n, C) with '
                         f'(B, n) = {(B, n)}, got {tuple(central_query.shape)} and '
                         f'{tuple(x.shape)}')
    devices = {central_query.device, k.device, x.device}
    if len(devices) > 1:
        raise ValueError(f'central_query, k and x must be on one device, got {devices}')
    if not runs_kernel(k.device.type):
        return linear_infsa_key_pool_reference(central_query, k, x, key_padding_mask)
    dtype = kernel_dtype(k, x)
    return torch.ops.mmlinear.linear_infsa_key_pool(
        central_query.to(torch.promote_types(dtype, torch.float32)).contiguous(), _rows(k, dtype),
        _rows(x, dtype), _mask(key_padding_mask))
