"""Attention through a positive feature map: the O(N) form that ELU+1 linear attention and
Performer share."""
from typing import Optional, Tuple

from torch import Tensor

from .efficient_attention import EfficientAttention
from .token_mixer import zero_padded_tokens


def kernel_attention(query_features: Tensor,
                     key_features: Tensor,
                     v: Tensor,
                     key_padding_mask: Optional[Tensor] = None,
                     eps: float = 0.,
                     need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
    """``out_i = phi(q_i)^T sum_j phi(k_j) v_j^T / (phi(q_i)^T sum_j phi(k_j) + eps)``.

    The similarity of a query and a key is the dot product of their (positive) features, so
    the sums over the keys can be taken once for every query: O(N m d) instead of O(N^2 d)
    (Katharopoulos et al., 2020, Eq. 5-6). Padded keys get zero features, so they add nothing
    to either sum.

    Args:
        query_features (Tensor): (B, H, T, m) phi(q), positive.
        key_features (Tensor): (B, H, S, m) phi(k), positive.
        v (Tensor): (B, H, S, d) values.
        key_padding_mask (Tensor, optional): (B, S) bool, True on padded keys.
        eps (float): Added to the normaliser. Defaults to 0.
        need_weights (bool): Also return the attention matrix (O(T S) memory).
            Defaults to False.

    Returns:
        tuple[Tensor, Tensor | None]: (B, H, T, d) outputs, and with ``need_weights`` the
        (B, H, T, S) weights, each row the similarities over their sum (plus eps).
    """
    key_features = zero_padded_tokens(key_features, key_padding_mask)
    if need_weights:
        scores = query_features @ key_features.transpose(-2, -1)
        weights = scores / (scores.sum(-1, keepdim=True) + eps)
        return weights @ v, weights
    key_value = key_features.transpose(-2, -1) @ v
    normaliser = query_features @ key_features.sum(-2).unsqueeze(-1)
    return (query_features @ key_value) / (normaliser + eps), None


class KernelAttention(EfficientAttention):
    """An :class:`EfficientAttention` through a positive feature map: :func:`kernel_attention`
    of the features that a subclass gives (:meth:`feature_maps`), with its
    :attr:`normaliser_eps`.

    Args:
        head_dims (int): d, the width of a head.
    """

    #: Added to the normaliser of :func:`kernel_attention`.
    normaliser_eps: float = 0.

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs scored per head: none (each query meets the keys' (m, d) sums)."""
        return 0

    def feature_maps(self, q: Tensor, k: Tensor,
                     key_padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """The positive features phi(q), (B, H, T, m), and phi(k), (B, H, S, m), of the
        (B, H, T, d) queries and (B, H, S, d) keys; padded keys are zeroed afterwards."""
        raise NotImplementedError

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        query_features, key_features = self.feature_maps(q, k, key_padding_mask)
        return kernel_attention(query_features, key_features, v, key_padding_mask,
                                self.normaliser_eps, need_weights)
