"""Pure InfSA: Frobenius-normalised ReLU attention, one Katz/Neumann hop per layer.

Per (sample, head), following the reference code (InfViT spec, section 3.2): q and k are
scaled by 1/sqrt(d); A+ = relu(q k^T); the scores are rho * A+ / (||A+||_F + eps), the norm
taken over the whole N x S matrix; the output is scores @ v.

A ``key_padding_mask`` zeroes padded key columns (and, for self-attention, padded query rows)
before the norm, so padding changes neither the norm nor the valid scores.
"""
from typing import Optional

import torch
from torch import Tensor

from .infsa_common import check_infsa_inputs, rho_per_head, scaled_float32


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
