"""What the two InfSA mixers share: the decay rho, eps, attention dropout and the explicit
form, whose weights are formed."""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .token_mixer import TokenMixer


class InfSAMixer(TokenMixer):
    """The base of Pure and Linear InfSA: attention whose weights sum to the learnable decay
    rho (given by the layer, see :attr:`TokenMixer.takes_rho`) instead of 1.

    ``forward`` takes ``rho`` as a keyword after the :class:`TokenMixer` arguments: a
    scalar, (1,) or (H,) tensor. Here it is the explicit form: the weights
    (:meth:`attention_weights`) in float32 (float64 for float64) outside autocast, dropped
    out in training and applied to the values (:meth:`apply_weights`).

    Args:
        head_dims (int): d, the width of a head.
        attn_drop (float): Dropout on the attention weights in training. Defaults to 0.
        eps (float): Stabiliser of the normalisations. Defaults to 1e-6.
    """

    takes_rho = True

    def __init__(self, head_dims: int, attn_drop: float = 0., eps: float = 1e-6) -> None:
        super().__init__(head_dims)
        self.attn_drop = attn_drop
        self.eps = eps

    def explicit(self, need_weights: bool) -> bool:
        """Whether the weights must be formed: they are asked for (maps), or dropped out
        (training with attention dropout); otherwise the ops compute the output without
        them."""
        return need_weights or (self.training and self.attn_drop > 0)

    def attention_weights(self, q: Tensor, k: Tensor, rho: Tensor,
                          key_padding_mask: Optional[Tensor]) -> Tensor:
        """The mechanism's weights, in float32 (float64 for float64), which ``forward``
        returns when asked."""
        raise NotImplementedError

    def apply_weights(self, weights: Tensor, v: Tensor, num_queries: int) -> Tensor:
        """The (B, H, T, d) outputs of the T queries from the (dropped-out) weights and the
        (B, H, S, d) values, both in the weights' dtype."""
        raise NotImplementedError

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False,
                *,
                rho: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """The explicit form; the weights before the dropout."""
        with torch.autocast(device_type=q.device.type, enabled=False):
            weights = self.attention_weights(q, k, rho, key_padding_mask)
            dropped = F.dropout(weights, self.attn_drop, self.training)
            out = self.apply_weights(dropped, v.to(weights.dtype), q.shape[2])
        return out.to(q.dtype), weights if need_weights else None
