"""Performer's FAVOR+ attention (Choromanski et al., 2021)."""
import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from .kernel_attention import KernelAttention


def orthogonal_gaussian_features(num_features: int, dims: int) -> Tensor:
    """Random projection directions drawn as FAVOR+ draws them (its Sec. 2.4, "orthogonal
    random features").

    Blocks of ``dims`` rows are orthonormal (a Haar-distributed orthogonal matrix, from the QR
    decomposition of a Gaussian one);
    every row is then scaled by the norm of an independent Gaussian vector, so each row has
    the length distribution of an i.i.d. Gaussian row while the rows of a block stay
    orthogonal (which lowers the estimator's variance). Draws from torch's global generator.

    Args:
        num_features (int): m, the rows.
        dims (int): d, the width of a head.

    Returns:
        Tensor: (m, d) float32.
    """
    blocks = []
    for _ in range(-(-num_features // dims)):
        q, r = torch.linalg.qr(torch.randn(dims, dims))
        # QR fixes the signs of R's diagonal, which ties each column's sign to the draw (the
        # first coordinate of the first column is always of one sign); undoing that makes Q
        # uniformly (Haar) distributed, so every row points in a uniform direction.
        blocks.append((q * torch.sign(torch.diagonal(r))).T)
    directions = torch.cat(blocks)[:num_features]
    return directions * torch.randn(num_features, dims).norm(dim=1, keepdim=True)


class PerformerAttention(KernelAttention):
    """Softmax attention estimated with positive orthogonal random features (FAVOR+,
    Choromanski et al., 2021, "Rethinking Attention with Performers", Lemma 1 and Sec. 2.4).

    With ``x' = x / d^(1/4)`` (the softmax temperature split between queries and keys),
    ``phi(x) = m^(-1/2) (exp(W x' - |x'|^2 / 2 - c) + eps)``: an unbiased estimate of
    ``exp(q'^T k')`` up to the constant ``c``, which is each query's own maximum and, for
    the keys, the maximum over a head's valid keys (both cancel in the normalisation; they
    keep the exponentials finite, as the reference implementation does). ``W`` is drawn
    once at construction (:func:`orthogonal_gaussian_features`) and kept as a buffer, so a
    checkpoint reproduces its model; it is not redrawn during training. Padded keys are left
    out of the sums and of ``c`` exactly.

    Args:
        head_dims (int): d, the width of a head.
        num_features (int, optional): m, the random features. Defaults to
            ``ceil(d ln d)``, the order the paper's analysis asks for.
        eps (float): The features' stabiliser. Defaults to 1e-6.
    """

    def __init__(self,
                 head_dims: int,
                 num_features: Optional[int] = None,
                 eps: float = 1e-6) -> None:
        super().__init__(head_dims)
        if num_features is None:
            num_features = max(1, math.ceil(head_dims * math.log(head_dims)))
        if num_features < 1:
            raise ValueError(f'num_features must be >= 1, got {num_features}')
        self.num_features = num_features
        self.eps = eps
        self.register_buffer('projection', orthogonal_gaussian_features(num_features, head_dims))

    def features(self,
                 x: Tensor,
                 is_query: bool,
                 key_padding_mask: Optional[Tensor] = None) -> Tensor:
        """FAVOR+'s positive features.

        Args:
            x (Tensor): (B, H, T, d) queries or keys.
            is_query (bool): Stabilise per token (queries) or per head over the valid
                tokens (keys).
            key_padding_mask (Tensor, optional): (B, T) bool, True on padded keys, which are
                left out of the keys' maximum.

        Returns:
            Tensor: (B, H, T, m).
        """
        x = x * self.head_dims**-0.25
        projected = x @ self.projection.to(x.dtype).T
        half_norm = x.pow(2).sum(-1, keepdim=True) / 2
        if is_query:
            shift = projected.amax(-1, keepdim=True)
        else:
            valid = projected
            if key_padding_mask is not None:
                valid = projected.masked_fill(key_padding_mask[:, None, :, None], float('-inf'))
            shift = valid.amax(dim=(-2, -1), keepdim=True)
        return (torch.exp(projected - half_norm - shift) + self.eps) * self.num_features**-0.5

    def feature_maps(self, q: Tensor, k: Tensor,
                     key_padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """:meth:`features` of the queries and of the keys."""
        return self.features(q, True), self.features(k, False, key_padding_mask)
