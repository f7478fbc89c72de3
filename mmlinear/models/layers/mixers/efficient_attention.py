"""The base of the efficient-attention baselines of the InfSA paper's comparison."""
from typing import Optional, Tuple

import torch
from torch import Tensor

from ...utils import autocast_disabled
from .token_mixer import TokenMixer
from .values import Values


class EfficientAttention(TokenMixer):
    """A baseline of the InfSA paper's comparison (ELU + 1, Performer, Linformer,
    Nystromformer, Agent Attention): a :class:`TokenMixer` whose weights, when asked for,
    are the (B, H, T, S) matrix its approximation multiplies V with.

    The baselines take options of their own (``mixer_cfg`` of the layer) and no attention
    dropout.

    Args:
        head_dims (int): d, the width of a head.
    """

    def mix(self,
            q: Tensor,
            k: Tensor,
            values: Values,
            key_padding_mask: Optional[Tensor] = None,
            *,
            need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        """:meth:`TokenMixer.mix` in float32 (float64 for float64) outside autocast: the
        exponentials, feature sums and the pseudo-inverse iteration overflow or drift in half
        precision. The output returns to q's dtype."""
        v = values.heads()
        acc = torch.promote_types(q.dtype, torch.float32)
        with autocast_disabled(q.device.type):
            out, weights = self(q.to(acc), k.to(acc), v.to(acc), key_padding_mask, need_weights)
        return out.to(q.dtype), weights
