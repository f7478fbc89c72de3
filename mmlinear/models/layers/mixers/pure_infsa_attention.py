"""Pure InfSA: the Frobenius-normalised ReLU scores, scaled by rho, applied to V."""
from typing import Optional, Tuple

from torch import Tensor

from mmlinear.ops import pure_infsa, pure_infsa_scores
from .infsa_mixer import InfSAMixer


class PureInfSAAttention(InfSAMixer):
    """Pure InfSA, ``rho * relu(Q K^T) / ||relu(Q K^T)||_F`` applied to V (see
    :func:`~mmlinear.ops.pure_infsa`).

    Without weights or attention dropout the op runs (a kernel where the extension has one);
    otherwise the scores are formed, in float32 (float64 for float64) outside autocast as
    the op normalises them.

    Args:
        head_dims (int): d, the width of a head.
        attn_drop (float): Dropout on the attention weights in training. Defaults to 0.
        eps (float): Stabiliser of the normalisation. Defaults to 1e-6.
    """

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs scored per head: every pair (T^2)."""
        return num_tokens**2

    def attention_weights(self, q: Tensor, k: Tensor, rho: Tensor,
                          key_padding_mask: Optional[Tensor]) -> Tensor:
        """(B, H, T, S): the rows of ``rho * A_hat`` (:func:`~mmlinear.ops.pure_infsa_scores`)."""
        return pure_infsa_scores(q, k, rho, key_padding_mask, self.eps)

    def apply_weights(self, weights: Tensor, v: Tensor, num_queries: int) -> Tensor:
        """``weights @ v``."""
        return weights @ v

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False,
                *,
                rho: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """Without weights or attention dropout, the op; else :meth:`InfSAMixer.forward`."""
        if not self.explicit(need_weights):
            return pure_infsa(q, k, v, rho, key_padding_mask, self.eps), None
        return super().forward(q, k, v, key_padding_mask, need_weights, rho=rho)
