"""The interface every efficient-attention baseline implements."""
from typing import Optional, Tuple

from torch import Tensor, nn


class EfficientAttention(nn.Module):
    """A token mixer over split heads, run by :class:`InfSAAttention` between its q / k / v
    projections and its output projection.

    ``forward(q, k, v, key_padding_mask=None, need_weights=False)`` takes (B, H, T, d)
    queries and (B, H, S, d) keys and values (unscaled: each mechanism applies its paper's
    scaling), an optional (B, S) bool mask, True on padded keys, and returns the (B, H, T, d)
    outputs with, when ``need_weights``, the (B, H, T, S) matrix the approximation multiplies
    V with (else None).

    Args:
        head_dims (int): d, the width of a head.
    """

    def __init__(self, head_dims: int) -> None:
        super().__init__()
        self.head_dims = head_dims

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs the mechanism scores per head for ``num_tokens`` tokens."""
        raise NotImplementedError

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        raise NotImplementedError
