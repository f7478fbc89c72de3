"""Bands of rows of a map and of its bilinear resize, computed exactly as on the whole map.

A band is a span of rows ``(start, stop)`` of a map (all its columns); it is held as a tensor
(B, C, stop - start, W) beside its first row. The spans a band of an output needs of the
inputs follow from the operations: a k x k convolution reads ``(k - 1) / 2`` rows on each
side (:func:`expand_span`), a bilinear resize the two source rows of each output row
(:func:`source_span`). An operation run on a band with its halo is right everywhere but in
the halo's own rows (where it meets zero padding instead of the map), so the halo is cropped
after it (:func:`crop_band`).
"""
from typing import Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

#: Rows [start, stop) of a map.
Span = Tuple[int, int]


def check_span(span: Span, length: int) -> None:
    """Raise a ValueError unless ``span`` holds rows and lies in [0, length)."""
    start, stop = span
    if not 0 <= start < stop <= length:
        raise ValueError(f'rows [{start}, {stop}) lie outside a map of {length} rows or hold '
                         f'none: a band needs 0 <= start < stop <= {length}')


def expand_span(span: Span, halo: int, length: int) -> Span:
    """``span`` with ``halo`` rows more on each side, clipped to the map's ``length`` rows."""
    return max(span[0] - halo, 0), min(span[1] + halo, length)


def union_span(first: Span, second: Span) -> Span:
    """The smallest span holding both (spans of one map that overlap or touch)."""
    return min(first[0], second[0]), max(first[1], second[1])


def crop_band(band: Tensor, band_start: int, span: Span) -> Tensor:
    """Rows ``span`` of a band whose first row is ``band_start``.

    Args:
        band (Tensor): (B, C, rows, W).
        band_start (int): The map row of its first row.
        span (Span): Map rows inside [band_start, band_start + rows).

    Returns:
        Tensor: (B, C, span rows, W), a view.
    """
    start, stop = span[0] - band_start, span[1] - band_start
    if start < 0 or stop > band.shape[2]:
        raise ValueError(f'rows {span} are not all in the band of rows '
                         f'[{band_start}, {band_start + band.shape[2]})')
    return band[:, :, start:stop]


def bilinear_taps(span: Span, src_len: int, dst_len: int,
                  align_corners: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """The source rows and weights of output rows ``span`` of a bilinear resize.

    ``F.interpolate(mode='bilinear')`` of a map of ``src_len`` rows to ``dst_len`` takes
    output row y from source position s = (y + 0.5) * src_len / dst_len - 0.5 (clamped at 0;
    s = y * (src_len - 1) / (dst_len - 1) with ``align_corners``): rows floor(s) and the next
    (the last row repeated at the bottom), weighted by the fraction of s.

    Args:
        span (Span): Output rows, in [0, dst_len).
        src_len (int): Rows of the source map.
        dst_len (int): Rows of the resized map.
        align_corners (bool): As ``F.interpolate``.

    Returns:
        tuple[Tensor, Tensor, Tensor]: (low, high, fraction), each (rows, ): the two source
        rows (int64) and the weight of ``high`` (float64).
    """
    check_span(span, dst_len)
    dst = torch.arange(span[0], span[1], dtype=torch.float64)
    if align_corners:
        src = dst * ((src_len - 1) / (dst_len - 1) if dst_len > 1 else 0.)
    else:
        src = ((dst + 0.5) * (src_len / dst_len) - 0.5).clamp(min=0)
    low = src.floor().long().clamp(max=src_len - 1)
    high = (low + 1).clamp(max=src_len - 1)
    return low, high, src - low


def source_span(span: Span, src_len: int, dst_len: int, align_corners: bool) -> Span:
    """The source rows that output rows ``span`` of a bilinear resize read."""
    low, high, _ = bilinear_taps(span, src_len, dst_len, align_corners)
    return int(low[0]), int(high[-1]) + 1


def resize_band(band: Tensor, band_start: int, span: Span, src_len: int, dst_size: Tuple[int, int],
                align_corners: bool) -> Tensor:
    """Output rows ``span`` of ``F.interpolate(map, dst_size, mode='bilinear')`` from a band.

    Bilinear interpolation is separable: the rows come from the band's two taps per output
    row, the columns from ``F.interpolate`` along the width alone (its row scale is then 1,
    which copies rows exactly), so the result equals the whole map's rows up to rounding.

    Args:
        band (Tensor): (B, C, rows, W) rows of the source map, holding :func:`source_span`.
        band_start (int): The source row of its first row.
        span (Span): Output rows.
        src_len (int): Rows of the whole source map.
        dst_size (tuple[int, int]): (H, W) of the whole resized map.
        align_corners (bool): As ``F.interpolate``.

    Returns:
        Tensor: (B, C, span rows, dst_size[1]).
    """
    low, high, fraction = bilinear_taps(span, src_len, dst_size[0], align_corners)
    if low[0] < band_start or high[-1] >= band_start + band.shape[2]:
        raise ValueError(f'resizing rows {span} reads source rows [{int(low[0])}, '
                         f'{int(high[-1]) + 1}), not all in the band of rows '
                         f'[{band_start}, {band_start + band.shape[2]})')
    weight = fraction.to(band.dtype).view(1, 1, -1, 1)
    rows = torch.lerp(band[:, :, low - band_start], band[:, :, high - band_start], weight)
    if rows.shape[3] == dst_size[1]:
        return rows
    return F.interpolate(
        rows, size=(rows.shape[2], dst_size[1]), mode='bilinear', align_corners=align_corners)
