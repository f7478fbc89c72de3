"""Linear attention with the ELU + 1 feature map (Katharopoulos et al., 2020)."""
from typing import Optional, Tuple

import torch.nn.functional as F
from torch import Tensor

from .kernel_attention import KernelAttention


class EluLinearAttention(KernelAttention):
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

    @property
    def normaliser_eps(self) -> float:
        """float: ``eps``."""
        return self.eps

    def feature_maps(self, q: Tensor, k: Tensor,
                     key_padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """``elu(q) + 1`` and ``elu(k) + 1``."""
        return F.elu(q) + 1, F.elu(k) + 1
