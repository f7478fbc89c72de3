"""``F.adaptive_avg_pool2d`` accumulated over bands of rows, for streamed inference (the
pooled kernels of WeightFormer's dynamic convolution, UperNet's pyramid pooling)."""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from mmlinear.utils.precision import autocast_disabled


def adaptive_bin_weights(lengths: Tensor, size: int, k: int) -> Tensor:
    """0/1 membership of the positions of one axis in the bins of ``adaptive_avg_pool2d``.

    Bin i of a length L spans [floor(i * L / k), ceil((i + 1) * L / k)); neighbouring bins
    overlap where k does not divide L, and a position shared by two bins is in both.

    Args:
        lengths (Tensor): (B, ) int64, the pooled length L of each image (<= ``size``).
        size (int): The axis' full length (the grid's rows or columns).
        k (int): The number of bins.

    Returns:
        Tensor: (B, k, size) bool, True where position p is in bin i of image b; positions
        from L on are in no bin.
    """
    i = torch.arange(k, device=lengths.device)
    starts = i * lengths[:, None] // k
    ends = -(-(i + 1) * lengths[:, None] // k)  # ceil
    positions = torch.arange(size, device=lengths.device)[None, None]
    return (positions >= starts[..., None]) & (positions < ends[..., None])


class AdaptivePoolSums:
    """``F.adaptive_avg_pool2d`` of a (B, C, H', W') map to k x k, accumulated over bands of
    rows.

    Each band adds its share of every bin's sum, so a bin whose rows fall in two bands, or a
    row that two overlapping bins share, is counted exactly as on the whole map; the means
    are taken in :meth:`result`, once every row of the grid has been added (each once, in
    any order).

    Args:
        hw_shape (tuple[int, int]): The grid (H', W').
        output_size (int): k.
        extents (Tensor, optional): (B, 2) int64, the (h, w) of each image's valid region, the
            top-left rectangle pooled instead of the whole map (see
            :func:`~mmlinear.models.utils.valid_extents`).
    """

    def __init__(self,
                 hw_shape: Tuple[int, int],
                 output_size: int,
                 extents: Optional[Tensor] = None) -> None:
        H, W = hw_shape
        if extents is not None and (extents.dim() != 2 or extents.shape[1] != 2 or extents.min() < 1
                                    or (extents[:, 0] > H).any() or (extents[:, 1] > W).any()):
            raise ValueError(f'extents must be (B, 2) valid (h, w) of at least 1 inside the grid '
                             f'{(H, W)}, got {extents.tolist()}')
        self.hw_shape = (H, W)
        self.output_size = output_size
        self.extents = extents
        # Without extents one set of bins, the whole grid's, serves every image.
        lengths = torch.tensor([[H, W]]) if extents is None else extents.long()
        self._row_weights = adaptive_bin_weights(lengths[:, 0], H, output_size)
        self._col_weights = adaptive_bin_weights(lengths[:, 1], W, output_size)
        # (B | 1, 1, k, k): the number of positions in each bin of each image.
        self._areas = (self._row_weights.sum(-1)[:, :, None] *
                       self._col_weights.sum(-1)[:, None, :]).unsqueeze(1)
        self._rows_added: List[bool] = [False] * H
        self._sums: Optional[Tensor] = None

    def add(self, band_map: Tensor, row_start: int) -> None:
        """Add the rows [row_start, row_start + rows) of the map.

        Args:
            band_map (Tensor): (B, C, rows, W') the band.
            row_start (int): Its first row in the grid.
        """
        H, W = self.hw_shape
        if band_map.dim() != 4 or band_map.shape[3] != W or band_map.shape[2] < 1:
            raise ValueError(f'band_map must be (B, C, rows, W\') with W\' = {W} and rows >= 1, '
                             f'got {tuple(band_map.shape)}')
        row_end = row_start + band_map.shape[2]
        if row_start < 0 or row_end > H:
            raise ValueError(f'band rows [{row_start}, {row_end}) are outside the grid\'s {H} rows')
        if any(self._rows_added[row_start:row_end]):
            raise ValueError(f'band rows [{row_start}, {row_end}) overlap rows already added')
        if self.extents is not None and self.extents.shape[0] != band_map.shape[0]:
            raise ValueError(f'band_map holds {band_map.shape[0]} images, the extents '
                             f'{self.extents.shape[0]}')
        if self._sums is None:
            B, C = band_map.shape[:2]
            k = self.output_size
            dtype = torch.promote_types(band_map.dtype, torch.float32)
            self._sums = band_map.new_zeros(B, C, k, k, dtype=dtype)
        elif band_map.shape[:2] != self._sums.shape[:2]:
            raise ValueError(f'band_map must be (B, C) = {tuple(self._sums.shape[:2])} as the '
                             f'bands before it, got {tuple(band_map.shape[:2])}')
        sums = self._sums
        rows = self._row_weights[:, None, :, row_start:row_end].to(sums)  # (B | 1, 1, k, rows)
        cols = self._col_weights[:, None].transpose(-2, -1).to(sums)  # (B | 1, 1, W', k)
        band_map = band_map.to(sums.dtype)
        if self.extents is not None:
            # Padding outside the valid region is in no bin, but a 0 weight would still turn
            # a non-finite value there into NaN: it must not enter the products at all.
            inside = rows.any(-2)[..., None] & cols.any(-1)[..., None, :]  # (B, 1, rows, W')
            band_map = band_map.masked_fill(~inside, 0)
        # Sums over rows and columns as two products with the 0/1 bin memberships; autocast
        # would round them to its low-precision dtype.
        with autocast_disabled(band_map.device.type):
            sums += rows @ (band_map @ cols)
        self._rows_added[row_start:row_end] = [True] * (row_end - row_start)

    def result(self) -> Tensor:
        """The pooled map, once every row has been added.

        Returns:
            Tensor: (B, C, k, k), as ``F.adaptive_avg_pool2d`` over each image's valid region,
            in float32 (float64 for float64 bands).
        """
        missing = [r for r, added in enumerate(self._rows_added) if not added]
        if missing:
            raise ValueError(f'rows {missing} of the grid were never added: the bin sums are '
                             f'incomplete')
        return self._sums / self._areas.to(self._sums)
