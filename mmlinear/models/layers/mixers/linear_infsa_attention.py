"""Linear-InfSA: a rank-1 pooled value broadcast to every query, O(N)."""
from typing import Optional, Tuple

import torch
from torch import Tensor

from mmlinear.ops import linear_infsa_key_weights
from ..linear_infsa_summary import LinearInfSAKeyPool, LinearInfSAQuerySums
from .infsa_mixer import InfSAMixer
from .values import Values


class LinearInfSAAttention(InfSAMixer):
    """Linear-InfSA (see :mod:`mmlinear.ops.linear_infsa`): key weights ``a`` from the
    energy-weighted central query, and the pooled value ``sum_j a_j v_j`` as every query's
    output.

    The output is one vector per (sample, head), so :meth:`mix`, without weights or
    attention dropout, pools the layer's inputs instead of the values: with
    ``v_hj = W_h x_j + b_h``, ``sum_j a_hj v_hj = W_h (sum_j a_hj x_j) + b_h sum_j a_hj``
    (H x C multiply-adds per token instead of the C x C of V), and the value projection then
    runs on H vectors per sample (:meth:`Values.from_pooled_inputs`); the layer's output
    projection runs once per sample. The sums are the two passes,
    :class:`LinearInfSAQuerySums` and :class:`LinearInfSAKeyPool`, over the whole sequence as
    one band. ``forward`` is the per-token form, with the weights formed; they are the
    (B, H, S) key weights ``a``.

    Args:
        head_dims (int): d, the width of a head.
        attn_drop (float): Dropout on the key weights in training. Defaults to 0.
        eps (float): Stabiliser of both normalisations. Defaults to 1e-6.
    """

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs scored per head: each key once, against the one energy-pooled
        query (T); the energies are per token and score no pair."""
        return num_tokens

    def mix(self,
            q: Tensor,
            k: Tensor,
            values: Values,
            key_padding_mask: Optional[Tensor] = None,
            *,
            need_weights: bool = False,
            rho: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """Without weights or attention dropout, the output is (B, H, d), in q's dtype."""
        if self.explicit(need_weights):
            return super().mix(q, k, values, key_padding_mask, need_weights=need_weights, rho=rho)
        query_sums = LinearInfSAQuerySums(self.eps)
        query_sums.add(q, key_padding_mask)
        key_pool = LinearInfSAKeyPool(query_sums.result(), rho, self.eps)
        key_pool.add(k, values.inputs, key_padding_mask)
        pooled = values.from_pooled_inputs(*key_pool.result())
        # Rounded to q's dtype (the autocast one) as the per-token path rounds its output.
        return pooled.to(q.dtype), None

    def attention_weights(self, q: Tensor, k: Tensor, rho: Tensor,
                          key_padding_mask: Optional[Tensor]) -> Tensor:
        """(B, H, S): the key weights ``a`` (:func:`~mmlinear.ops.linear_infsa_key_weights`)."""
        return linear_infsa_key_weights(q, k, rho, key_padding_mask, self.eps)

    def apply_weights(self, weights: Tensor, v: Tensor, num_queries: int) -> Tensor:
        """The pooled value ``sum_j a_j v_j``, expanded to the queries (stride 0)."""
        pooled = torch.einsum('bhs,bhsd->bhd', weights, v)
        return pooled.unsqueeze(2).expand(-1, -1, num_queries, -1)
