"""Nystromformer's landmark attention (Xiong et al., 2021)."""
from typing import Optional, Tuple

import torch
from torch import Tensor

from .efficient_attention import EfficientAttention
from .token_mixer import key_softmax, segment_means, zero_padded_tokens


def iterative_pinv(matrix: Tensor, num_iterations: int) -> Tensor:
    """Moore-Penrose pseudo-inverse by the iteration Nystromformer uses (Xiong et al., 2021,
    Eq. 13-14, after Razavi et al., 2014).

    ``Z_0 = A^T / (||A||_1 ||A||_inf)``, then
    ``Z_{j+1} = Z_j (13 I - A Z_j (15 I - A Z_j (7 I - A Z_j))) / 4``. The norms are taken
    per matrix, so one sample's inverse does not depend on the rest of the batch.

    Args:
        matrix (Tensor): (..., m, m).
        num_iterations (int): Iterations.

    Returns:
        Tensor: (..., m, m).
    """
    max_column_sum = matrix.abs().sum(-2).amax(-1)[..., None, None]
    max_row_sum = matrix.abs().sum(-1).amax(-1)[..., None, None]
    inverse = matrix.transpose(-2, -1) / (max_column_sum * max_row_sum)
    identity = torch.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
    for _ in range(num_iterations):
        product = matrix @ inverse
        inverse = 0.25 * inverse @ (13 * identity -
                                    product @ (15 * identity - product @ (7 * identity - product)))
    return inverse


class NystromAttention(EfficientAttention):
    """Softmax attention approximated through m landmarks (Xiong et al., 2021,
    "Nystromformer", Eq. 15):
    ``softmax(Q K~^T) pinv(softmax(Q~ K~^T)) softmax(Q~ K^T) V``, with the landmarks
    ``Q~``, ``K~`` the means of m contiguous segments of the queries and keys, and each of q
    and k scaled by ``d^(-1/4)``.

    A sequence of at most m tokens is attended exactly (softmax), as the reference code does
    when the landmarks are the tokens. When m does not divide the length the segments are
    those of ``adaptive_avg_pool1d`` (lengths floor or ceil of T / m); the paper's equal
    segments are the case where m divides T. Padding follows the reference code: padded
    queries and keys are zeroed before the segment means and padded keys are left out of
    the last softmax, so the landmarks (means over positions) still depend on where the
    padding lies. The paper's optional depthwise convolution of V is not part of this
    module.

    Args:
        head_dims (int): d, the width of a head.
        num_landmarks (int): m. Defaults to 64.
        pinv_iterations (int): Iterations of :func:`iterative_pinv`. Defaults to 6.
    """

    def __init__(self, head_dims: int, num_landmarks: int = 64, pinv_iterations: int = 6) -> None:
        super().__init__(head_dims)
        if num_landmarks < 1 or pinv_iterations < 1:
            raise ValueError(f'num_landmarks and pinv_iterations must be >= 1, got '
                             f'{num_landmarks} and {pinv_iterations}')
        self.num_landmarks = num_landmarks
        self.pinv_iterations = pinv_iterations

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs scored per head: the T x m, m x m and m x T kernels (T^2 when the
        sequence is attended exactly)."""
        m = self.num_landmarks
        if num_tokens <= m:
            return num_tokens**2
        return 2 * num_tokens * m + m * m

    def landmarks(self, x: Tensor) -> Tensor:
        """(B, H, T, d) -> (B, H, m, d): the means of m contiguous segments of the tokens."""
        return segment_means(x, self.num_landmarks)

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        scale = self.head_dims**-0.25
        q = zero_padded_tokens(q * scale, key_padding_mask)
        k = zero_padded_tokens(k * scale, key_padding_mask)
        if q.shape[-2] <= self.num_landmarks:
            weights = key_softmax(q @ k.transpose(-2, -1), key_padding_mask)
            return weights @ v, weights if need_weights else None
        q_landmarks, k_landmarks = self.landmarks(q), self.landmarks(k)
        queries_to_landmarks = (q @ k_landmarks.transpose(-2, -1)).softmax(-1)
        landmark_kernel = (q_landmarks @ k_landmarks.transpose(-2, -1)).softmax(-1)
        landmarks_to_keys = key_softmax(q_landmarks @ k.transpose(-2, -1), key_padding_mask)
        left = queries_to_landmarks @ iterative_pinv(landmark_kernel, self.pinv_iterations)
        out = left @ (landmarks_to_keys @ v)
        return out, (left @ landmarks_to_keys) if need_weights else None
