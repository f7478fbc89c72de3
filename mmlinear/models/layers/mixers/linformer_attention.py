"""Linformer's low-rank attention (Wang et al., 2020)."""
import math
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from .efficient_attention import EfficientAttention
from .token_mixer import zero_padded_tokens


class LinformerAttention(EfficientAttention):
    """Softmax attention over keys and values projected along the sequence to ``k`` rows
    (Wang et al., 2020, "Linformer", Eq. 7): ``softmax(Q (E K)^T / sqrt(d)) (F V)``.

    ``E`` and ``F`` are learned (k, n) matrices over the positions of a sequence of at most
    ``n = max_tokens`` tokens, shared by the heads of the layer (the paper's "headwise
    sharing"), initialised Xavier-uniform with gain 1 / sqrt(2) as its reference code does.
    A shorter sequence uses their first columns, which is the same as padding it with zero
    tokens to ``n``; a longer one is refused, since the projection has no columns for it.
    Padded tokens get zero keys and values (they add nothing to the projected ones), but the
    projection mixes positions, so unlike softmax attention the valid tokens' outputs still
    depend on where the padding lies.

    Args:
        head_dims (int): d, the width of a head.
        max_tokens (int): n, the longest sequence (InfViT: the CLS token and the patches of
            its ``img_size``).
        proj_len (int, optional): k. Defaults to ``max(1, n // 4)`` (the reference code's
            compression of 4).
    """

    def __init__(self, head_dims: int, max_tokens: int, proj_len: Optional[int] = None) -> None:
        super().__init__(head_dims)
        if proj_len is None:
            proj_len = max(1, max_tokens // 4)
        if max_tokens < 1 or proj_len < 1:
            raise ValueError(f'max_tokens and proj_len must be >= 1, got {max_tokens} and '
                             f'{proj_len}')
        self.max_tokens = max_tokens
        self.proj_len = proj_len
        self.key_projection = nn.Parameter(torch.empty(proj_len, max_tokens))
        self.value_projection = nn.Parameter(torch.empty(proj_len, max_tokens))
        for weight in (self.key_projection, self.value_projection):
            nn.init.xavier_uniform_(weight, gain=1 / math.sqrt(2))

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs scored per head: every query against the k projected keys."""
        return num_tokens * self.proj_len

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        """S must not exceed ``max_tokens``."""
        num_keys = k.shape[-2]
        if num_keys > self.max_tokens:
            raise ValueError(f'Linformer projects at most max_tokens={self.max_tokens} tokens '
                             f'(the img_size it was built for), got {num_keys}; build it with '
                             f'a larger img_size')
        k = zero_padded_tokens(k, key_padding_mask)
        v = zero_padded_tokens(v, key_padding_mask)
        key_projection = self.key_projection[:, :num_keys].to(k.dtype)
        value_projection = self.value_projection[:, :num_keys].to(v.dtype)
        low_keys = torch.einsum('ks,bhsd->bhkd', key_projection, k)
        low_values = torch.einsum('ks,bhsd->bhkd', value_projection, v)
        attn = (q @ low_keys.transpose(-2, -1) * self.head_dims**-0.5).softmax(-1)
        weights = None
        if need_weights:
            weights = torch.einsum('bhtk,ks->bhts', attn, value_projection)
            if key_padding_mask is not None:
                weights = weights.masked_fill(key_padding_mask[:, None, None, :], 0.)
        return attn @ low_values, weights
