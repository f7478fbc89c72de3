"""Linear attention with the ELU + 1 feature map (Katharopoulos et al., 2020)."""
from typing import Optional, Tuple

import torch.nn.functional as F
from torch import Tensor

from .efficient_attention import EfficientAttention
from .kernel_attention import kernel_attention


class EluLinearAttention(EfficientAttention):
    """Non-causal linear attention, ``phi(x) = elu(x) + 1`` (Katharopoulos et al., 2020,
    "Transformers are RNNs", Eq. 6-7).

    The queries and keys enter the feature map unscaled, as in the paper; the normaliser gets
    ``eps`` as in its reference code. Padded keys are left out of both sums exactly, so the
    valid tokens' outputs do not depend on the padding.

    Args:
        head_dims (int): d, the width of a head.
        eps (float): Added to the normaliser. Defaults to 1e-6.
    """

    def __init__(self, head_dims: int, eps: float = 1e-6) -> None:
        super().__init__(head_dims)
        self.eps = eps

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs scored per head: none (each query meets the keys' (m, d) sums)."""
        return 0

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        """See :class:`EfficientAttention`."""
        return kernel_attention(
            F.elu(q) + 1,
            F.elu(k) + 1, v, key_padding_mask, self.eps, need_weights)
