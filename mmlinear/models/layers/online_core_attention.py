"""The cores' softmax attention accumulated over bands of keys and values (an online softmax)."""
import math
from typing import Optional

import torch
from torch import Tensor

from ..utils import autocast_disabled


class OnlineCoreAttention:
    """Softmax attention of a fixed set of queries over keys and values that arrive in bands.

    The core queries of VECA attend to all K + N tokens; to run a block over the image band by
    band, the keys and values of each band are folded into three running quantities per query
    row, as flash attention does: the maximum score m seen so far, the sum l of
    ``exp(score - m)`` and the sum ``acc`` of ``exp(score - m) * value``. A band that raises
    the maximum rescales l and ``acc`` by ``exp(m_old - m_new)``, so every exponent stays at
    most 0 and nothing overflows. After the last band, ``acc / l`` equals
    ``F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=allowed)`` (SDPA's default
    scale 1 / sqrt(d)) whatever the band sizes and their order. The state is kept in float32
    (float64 for float64 queries), also under autocast, and the result is rounded once to the
    queries' dtype.

    There is no attention dropout: this is the inference path.

    Args:
        q (Tensor): (B, heads, K, d) rotated core queries, floating-point.
    """

    def __init__(self, q: Tensor) -> None:
        if q.dim() != 4:
            raise ValueError(f'core queries must be (B, heads, K, d), got {tuple(q.shape)}')
        if not q.is_floating_point():
            raise TypeError(f'core queries must be floating-point, got {q.dtype}')
        if q.shape[2] == 0 or q.shape[3] == 0:
            raise ValueError(f'core queries must have K >= 1 and d >= 1, got {tuple(q.shape)}')
        self.dtype = q.dtype
        acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        # Scaled once here rather than every band's scores.
        self.q = q.to(acc_dtype) * (1.0 / math.sqrt(q.shape[-1]))
        stat_shape = (*q.shape[:3], 1)
        self.max = q.new_full(stat_shape, float('-inf'), dtype=acc_dtype)
        self.sum = q.new_zeros(stat_shape, dtype=acc_dtype)
        self.acc = q.new_zeros(q.shape, dtype=acc_dtype)
        self.num_bands = 0

    def add(self, k: Tensor, v: Tensor, key_padding_mask: Optional[Tensor] = None) -> None:
        """Fold a band of keys and values into the running softmax.

        Args:
            k (Tensor): (B, heads, n, d) rotated keys of the band, in the queries' dtype.
            v (Tensor): (B, heads, n, d) values of the band.
            key_padding_mask (Tensor, optional): (B, n) bool, True on padded keys, which get
                no weight. A sample whose keys in this band are all padded is left unchanged
                by the band. Defaults to None (every key counts).
        """
        B, H, K, d = self.q.shape
        if k.dim() != 4 or k.shape[:2] != (B, H) or k.shape[3] != d:
            raise ValueError(f'keys must be (B={B}, heads={H}, n, d={d}), got {tuple(k.shape)}')
        if v.shape != k.shape:
            raise ValueError(f'values must have the keys\' shape {tuple(k.shape)}, got '
                             f'{tuple(v.shape)}')
        if k.dtype != self.dtype or v.dtype != self.dtype:
            raise TypeError(f'keys and values must have the queries\' dtype {self.dtype}, got '
                            f'{k.dtype} and {v.dtype}')
        n = k.shape[2]
        if n == 0:
            raise ValueError('a band must hold at least one key')
        if key_padding_mask is not None:
            if key_padding_mask.shape != (B, n):
                raise ValueError(f'key_padding_mask must be (B={B}, n={n}), got '
                                 f'{tuple(key_padding_mask.shape)}')
            if key_padding_mask.dtype != torch.bool:
                raise TypeError(f'key_padding_mask must be bool, got {key_padding_mask.dtype}')
        # Under autocast the two products would run in its low-precision dtype and round
        # the running sums once per band.
        with autocast_disabled(self.q.device.type):
            scores = self.q @ k.to(self.q.dtype).transpose(-2, -1)  # (B, H, K, n)
            if key_padding_mask is not None:
                scores = scores.masked_fill(key_padding_mask[:, None, None, :], float('-inf'))
            new_max = torch.maximum(self.max, scores.amax(dim=-1, keepdim=True))
            # A row that has seen only padded keys keeps a maximum of -inf; exponents taken
            # against 0 there give exp(-inf) = 0 instead of exp(-inf - (-inf)) = NaN.
            shift = new_max.masked_fill(new_max == float('-inf'), 0.)
            weights = (scores - shift).exp()
            rescale = (self.max - shift).exp()
            self.sum = self.sum * rescale + weights.sum(dim=-1, keepdim=True)
            self.acc = self.acc * rescale + weights @ v.to(self.q.dtype)
            self.max = new_max
        self.num_bands += 1

    def result(self) -> Tensor:
        """The attention output over every key added so far.

        Every query row must have seen at least one key that is not padded (VECA adds the
        cores' own keys, which never are).

        Returns:
            Tensor: (B, heads, K, d) in the queries' dtype.
        """
        if self.num_bands == 0:
            raise ValueError('no keys have been added: call add() with at least one band first')
        return (self.acc / self.sum).to(self.dtype)
