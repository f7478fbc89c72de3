"""The ablation control: an attention branch that mixes nothing."""
from typing import Optional, Tuple

import torch
from torch import Tensor

from .token_mixer import TokenMixer


class NoMixing(TokenMixer):
    """No token mixing: the attention branch outputs zeros, so a block is its MLP alone.

    The layer around it holds no projections (:attr:`projected` is False: parameters that
    never receive a gradient break DDP), so it hands over its inputs split into heads as the
    queries, keys and values.

    Args:
        head_dims (int): d, the width of a head.
    """

    projected = False

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs scored per head: none."""
        return 0

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, None]:
        """Zeros shaped as the queries, and no weights."""
        return torch.zeros_like(q), None
