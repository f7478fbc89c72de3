"""Dynamic linear layer with Bilateral Activation (WeightFormer; He, Han and Huang, 2026)."""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from mmengine.model.weight_init import trunc_normal_
from torch import Tensor, nn

from mmlinear.ops import Linear, activate, inference_dtype, linear
from ..utils import autocast_disabled, check_tokens
from .dynamic_layer import DynamicLayer


def pool_tokens_2x2(x: Tensor,
                    hw_shape: Tuple[int, int],
                    token_padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Optional[Tensor]]:
    """Average row-major tokens over non-overlapping 2 x 2 blocks of their grid.

    As ``nn.AvgPool2d(2)`` in the reference, an odd last row / column is dropped, so
    M = floor(H / 2) * floor(W / 2); a grid with a side of 1 gives M = 0 (no block).

    Args:
        x (Tensor): (B, N, C) tokens, N = H * W.
        hw_shape (tuple[int, int]): The token grid (H, W).
        token_padding_mask (Tensor, optional): (B, N) bool, True on padded tokens.

    Returns:
        tuple: pooled tokens (B, M, C), and, with a mask, (B, M) bool that is True for the
        blocks made only of valid tokens (None without a mask).
    """
    B, N, C = x.shape
    H, W = hw_shape
    if H < 2 or W < 2:
        empty_valid = None if token_padding_mask is None else token_padding_mask.new_zeros(B, 0)
        return x.new_zeros(B, 0, C), empty_valid
    pooled = F.avg_pool2d(x.transpose(1, 2).reshape(B, C, H, W), 2)
    pooled = pooled.flatten(2).transpose(1, 2)
    if token_padding_mask is None:
        return pooled, None
    valid = (~token_padding_mask).to(x.dtype).reshape(B, 1, H, W)
    # The mean of four 0/1 values is exactly 1 only when all four tokens are valid.
    block_valid = F.avg_pool2d(valid, 2).flatten(1) == 1
    return pooled, block_valid


def check_pooling_band(band: Tuple[int, int], height: int) -> None:
    """Raise a ValueError unless the rows [r0, r1) of a grid of ``height`` rows can be
    2 x 2-pooled on their own, giving exactly the grid's blocks in them.

    Args:
        band (tuple[int, int]): The rows [r0, r1).
        height (int): The grid's rows H.
    """
    r0, r1 = band
    if not 0 <= r0 < r1 <= height:
        raise ValueError(f'band rows [{r0}, {r1}) must be a non-empty range of the grid\'s '
                         f'{height} rows')
    if r0 % 2:
        raise ValueError(f'band rows [{r0}, {r1}): the 2 x 2 pooling needs a band that starts '
                         f'on an even row (its blocks pair rows 2i and 2i + 1), got start row '
                         f'{r0}')
    if r1 % 2 and r1 != height:
        raise ValueError(f'band rows [{r0}, {r1}) end on an odd row inside the grid of {height} '
                         f'rows: row {r1 - 1} would be split from its 2 x 2 block; only the band '
                         f'that holds the last row of an odd-height grid may have an odd height')


class DynamicLinear(DynamicLayer):
    """A linear layer whose weight is predicted per sample from the whole token grid.

    The official ``DynLinear`` ("Bilateral Activation"); the code, not the paper's
    pseudo-code, is followed. With P the 2 x 2-pooled tokens (M of them) and N the token
    count::

        [A | G] = P Wp + bp          # fused predictor ``wfm``: C_in -> C_in / r + C_out / r
        U = SiLU(A) W1,  V = SiLU(G) W4       # a SiLU on each side: "bilateral"
        dW = U^T V * C_in^(-1/2) / N          # (C_in, C_out), a sum of M outer products
        dW_hat[:, j] = dW[:, j] / (||dW[:, j]||_2 + 1)
        y = x (W0 + dW_hat) + b

    Note the divisor is the full N, not M, and every column of ``dW_hat`` has norm < 1.
    The cost is linear in N: 6.375 N C^2 MACs for C_out = 4 C (a static layer: 4 N C^2).

    Parameter names and layouts are those of the released checkpoints: ``w`` (W0) is stored
    (in, out), the transpose of ``nn.Linear.weight``; ``b`` is the bias; ``wfm`` is the fused
    predictor (an ``nn.Linear`` with bias); ``w1`` (W1) is (in / r, in) and ``w2`` (W4) is
    (out / r, out).

    On odd grids the last row / column is left out of the pooling while /N keeps every
    token, as the reference (its ``AvgPool2d(2)`` floors); a grid with a side of 1 has no
    2 x 2 block and gives dW = 0. With a ``token_padding_mask`` (off by default, which is the
    reference behaviour) only blocks of four valid tokens are summed and the divisor is the
    number of valid tokens, so a padded image whose valid region is the top-left corner gets
    the weight of the unpadded image.

    Streamed over bands of token rows, the accumulator of :meth:`delta_sums` takes each
    band's share of U^T V and its token count (:meth:`partial_delta_sum`) and turns their
    totals into dW_hat (:meth:`delta_from_sum`); :meth:`predict_delta` is the same with the
    whole grid as one band.

    Args:
        in_features (int): Input width C_in, divisible by ``rank_ratio``.
        out_features (int, optional): Output width C_out, divisible by ``rank_ratio``.
            Defaults to ``in_features``.
        rank_ratio (int): r, the reduction of both predictor factors. Defaults to 4.
        activation (str, optional): An activation of the output, None or 'gelu' ('gelu' in
            WeightFormer's MLP, where the layer is ``linear1``), fused into the matmul where
            :func:`mmlinear.ops.linear` can. Defaults to None.
    """

    def __init__(self,
                 in_features: int,
                 out_features: Optional[int] = None,
                 rank_ratio: int = 4,
                 activation: Optional[str] = None) -> None:
        super().__init__()
        if activation not in (None, 'gelu'):
            raise ValueError(f"activation must be None or 'gelu', got {activation!r}")
        out_features = out_features or in_features
        if in_features % rank_ratio or out_features % rank_ratio:
            raise ValueError(f'in_features ({in_features}) and out_features ({out_features}) '
                             f'must be divisible by rank_ratio ({rank_ratio})')
        self.in_features = in_features
        self.out_features = out_features
        self.rank_ratio = rank_ratio
        self.activation = activation
        self.scale = in_features**-0.5
        self.split_sizes = (in_features // rank_ratio, out_features // rank_ratio)
        self.w = nn.Parameter(torch.empty(in_features, out_features))
        self.b = nn.Parameter(torch.empty(out_features))
        self.wfm = Linear(in_features, sum(self.split_sizes))
        self.w1 = nn.Parameter(torch.empty(self.split_sizes[0], in_features))
        self.w2 = nn.Parameter(torch.empty(self.split_sizes[1], out_features))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The reference initialisation: every tensor truncated normal (std 0.02), the bias
        ``b`` included; the predictor's bias zero (the model-level ViT init sets it)."""
        for param in (self.w, self.b, self.w1, self.w2, self.wfm.weight):
            trunc_normal_(param, std=.02)
        nn.init.zeros_(self.wfm.bias)

    def partial_delta_sum(self,
                          x: Tensor,
                          hw_shape: Tuple[int, int],
                          band: Optional[Tuple[int, int]] = None,
                          token_padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """The un-normalised sum U^T V over the 2 x 2 blocks of a band of token rows.

        dW of the grid is the sum of these partial sums over bands that tile its rows, times
        C_in^(-1/2) / N (:meth:`delta_from_sum`). A band must start on an even row, so that its
        2 x 2 blocks are the grid's; only the band that holds the last row of an odd-height
        grid may end on an odd row: that row is left out of the pooling (as on the whole grid)
        while its tokens still count.

        Args:
            x (Tensor): (B, n, C_in) row-major tokens of the band, n = (r1 - r0) * W.
            hw_shape (tuple[int, int]): The whole token grid (H, W).
            band (tuple[int, int], optional): The rows [r0, r1) of the grid that ``x`` holds.
                Defaults to the whole grid (0, H).
            token_padding_mask (Tensor, optional): (B, n) bool, True on the band's padded
                tokens.

        Returns:
            tuple[Tensor, Tensor]: The sum U^T V (B, C_in, C_out), in float32 (float64 for
            float64 ``x``) also under autocast; and the band's token count (B, ) int64, its
            valid tokens with a mask.
        """
        H, W = hw_shape
        r0, r1 = (0, H) if band is None else band
        if band is not None:
            # (The whole grid needs no check, and a check on its symbolic height would make
            # an exported graph hold for even heights only.)
            check_pooling_band(band, H)
        check_tokens(x, (r1 - r0, W), token_padding_mask)
        pooled, block_valid = pool_tokens_2x2(x, (r1 - r0, W), token_padding_mask)
        a, g = self.wfm(pooled).split(self.split_sizes, dim=-1)
        u = F.silu(a) @ self.w1
        v = F.silu(g) @ self.w2
        if token_padding_mask is None:
            num_tokens = torch.full((x.shape[0], ), x.shape[1], device=x.device)
        else:
            v = v * block_valid[..., None].to(v.dtype)
            num_tokens = (~token_padding_mask).sum(1)
        # Under autocast u and v leave the predictor in the low-precision dtype; their product
        # is a sum over every block of the grid (band partial sums included), so it is
        # accumulated in float32 instead of being rounded to that dtype once per band.
        dtype = torch.promote_types(v.dtype, torch.float32)
        with autocast_disabled(x.device.type):
            return u.transpose(-2, -1).to(dtype) @ v.to(dtype), num_tokens

    def delta_from_sum(self,
                       delta_sum: Tensor,
                       num_tokens: Tensor,
                       dtype: Optional[torch.dtype] = None) -> Tensor:
        """dW_hat from the completed sum U^T V of the grid and its token count.

        The scale, the division by the count and the column soft-normalisation act on the
        completed sum: they do not distribute over bands.

        Args:
            delta_sum (Tensor): (B, C_in, C_out), the sum of :meth:`partial_delta_sum` over
                bands that tile the grid's rows.
            num_tokens (Tensor): (B, ), the sum of their counts: N, or each image's number of
                valid tokens with a mask (an image without any is taken as 1).
            dtype (torch.dtype, optional): The result's dtype. Defaults to ``delta_sum``'s.

        Returns:
            Tensor: (B, C_in, C_out), every column of norm < 1.
        """
        num_tokens = num_tokens.clamp(min=1).to(delta_sum.dtype)
        delta = delta_sum * self.scale / num_tokens[:, None, None]
        delta = delta / (delta.norm(dim=-2, keepdim=True) + 1.)
        return delta if dtype is None else delta.to(dtype)

    def delta_sums(self, hw_shape: Tuple[int, int]) -> 'DeltaSums':
        """An empty accumulator of the weight change of a grid, streamed in bands of rows
        (:meth:`DeltaSums.add` each band, then :meth:`DeltaSums.result`).

        Args:
            hw_shape (tuple[int, int]): The whole token grid (H, W).

        Returns:
            DeltaSums: Its ``result()`` is :meth:`predict_delta` of the grid.
        """
        return DeltaSums(self, hw_shape)

    def predict_delta(self,
                      x: Tensor,
                      hw_shape: Tuple[int, int],
                      token_padding_mask: Optional[Tensor] = None) -> Tensor:
        """(B, C_in, C_out) in x's dtype: the weight change dW_hat, the whole grid as one
        band."""
        sums = self.delta_sums(hw_shape)
        sums.add(x, token_padding_mask=token_padding_mask)
        return sums.result()

    def forward(self,
                x: Tensor,
                hw_shape: Tuple[int, int],
                token_padding_mask: Optional[Tensor] = None) -> Tensor:
        return self.apply_delta(x, self.predict_delta(x, hw_shape, token_padding_mask))

    def apply_delta(self, x: Tensor, delta: Tensor) -> Tensor:
        """``act(x (W0 + dW_hat) + b)``: the layer with its per-sample weight change.

        Args:
            x (Tensor): (B, n, C_in) tokens (all of the grid, or a band of it).
            delta (Tensor): (B, C_in, C_out), dW_hat of the whole grid.

        Returns:
            Tensor: (B, n, C_out).
        """
        weight = delta + self.w
        if x.shape[0] == 1 and inference_dtype(x, weight, self.b) is not None:
            # One sample, one weight: a linear layer, whose bias and activation the CPU
            # backend of mmlinear.ops.linear may fuse.
            return linear(x, weight[0].t(), self.b, self.activation)
        return activate(x @ weight + self.b, self.activation)

    def extra_repr(self) -> str:
        return (f'in_features={self.in_features}, out_features={self.out_features}, '
                f'rank_ratio={self.rank_ratio}, activation={self.activation}')


class DeltaSums:
    """The sums :class:`DynamicLinear`'s weight change reduces a grid to, accumulated over
    bands of token rows: U^T V and the token count (:meth:`DynamicLinear.delta_sums`).

    Args:
        layer (DynamicLinear): The layer whose weight change is accumulated.
        hw_shape (tuple[int, int]): The whole token grid (H, W).
    """

    def __init__(self, layer: DynamicLinear, hw_shape: Tuple[int, int]) -> None:
        self.layer = layer
        self.hw_shape = hw_shape
        self.delta_sum: Optional[Tensor] = None  # (B, C_in, C_out)
        self.num_tokens: Optional[Tensor] = None  # (B, )
        self.dtype: Optional[torch.dtype] = None

    def add(self,
            x: Tensor,
            band: Optional[Tuple[int, int]] = None,
            token_padding_mask: Optional[Tensor] = None) -> None:
        """Add a band of token rows (as :meth:`DynamicLinear.partial_delta_sum` takes it).

        Args:
            x (Tensor): (B, n, C_in) row-major tokens of the band.
            band (tuple[int, int], optional): The rows [r0, r1) of the grid that ``x``
                holds. Defaults to the whole grid.
            token_padding_mask (Tensor, optional): (B, n) bool, True on the band's padded
                tokens.
        """
        part, count = self.layer.partial_delta_sum(x, self.hw_shape, band, token_padding_mask)
        if self.delta_sum is None:
            self.delta_sum, self.num_tokens, self.dtype = part, count, x.dtype
        else:
            self.delta_sum, self.num_tokens = self.delta_sum + part, self.num_tokens + count

    def result(self) -> Tensor:
        """dW_hat, once bands that tile the grid's rows were added.

        Returns:
            Tensor: (B, C_in, C_out) in the tokens' dtype, every column of norm < 1.
        """
        if self.delta_sum is None:
            raise RuntimeError('no tokens have been added: call add() with at least one band '
                               'first')
        return self.layer.delta_from_sum(self.delta_sum, self.num_tokens, self.dtype)
