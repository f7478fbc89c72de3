"""Scaled dot-product attention, the matched baseline of the InfSA mixers."""
from typing import Optional, Tuple

import torch.nn.functional as F
from torch import Tensor

from .token_mixer import TokenMixer, key_softmax


class SoftmaxAttention(TokenMixer):
    """``softmax(Q K^T / sqrt(d)) V`` (Vaswani et al., 2017), with attention dropout.

    Without ``need_weights`` it runs ``F.scaled_dot_product_attention`` (a fused kernel where
    the device has one); with it, the logits are formed to return the weights.

    Args:
        head_dims (int): d, the width of a head.
        attn_drop (float): Dropout on the attention weights in training. Defaults to 0.
    """

    def __init__(self, head_dims: int, attn_drop: float = 0.) -> None:
        super().__init__(head_dims)
        self.attn_drop = attn_drop

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs scored per head: every pair (T^2)."""
        return num_tokens**2

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        """The weights are (B, H, T, S), before the dropout."""
        attn_drop = self.attn_drop if self.training else 0.
        attn_mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
        if not need_weights:
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, dropout_p=attn_drop), None
        weights = key_softmax((q @ k.transpose(-2, -1)) * self.head_dims**-0.5, key_padding_mask)
        return F.dropout(weights, attn_drop) @ v, weights
