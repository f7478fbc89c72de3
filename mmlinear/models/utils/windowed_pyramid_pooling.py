"""UperNet's pyramid pooling over a window of the map around each position instead of the
whole map, computed exactly from running sums (see docs/large_images.md, "Context window of the
pyramid pooling")."""
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmlinear.utils.precision import autocast_disabled

#: (start, stop) rows of a map.
Span = Tuple[int, int]
#: The value that asks for the whole map by name: it overrides a head's own window where None
#: means "the head's own" (``segment_large_image``, ``--context-window``).
WHOLE_MAP = 'whole'
#: A context window as configured: None or 'whole' (the whole map), one side, or (rows, columns).
ContextWindow = Optional[Union[str, int, Sequence[int]]]


def check_context_window(
        window: ContextWindow,
        unit: str = "cells of the pyramid pooling's input map") -> Optional[Tuple[int, int]]:
    """The window as (rows, columns), or None for the whole map; a ValueError naming the
    allowed values for anything else.

    Args:
        window (None | str | int | Sequence[int]): None or 'whole' (the whole map), a
            positive side, or a pair of positive sides, in ``unit``.
        unit (str): What the sides count, for the error message. Defaults to the cells of
            the pyramid pooling's input map.

    Returns:
        tuple[int, int] | None: (rows, columns) of the window, or None.
    """
    if window is None or window == WHOLE_MAP:
        return None
    sides = (window, window) if isinstance(window, int) else window
    if (not isinstance(sides, (tuple, list)) or len(sides) != 2
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in sides)):
        raise ValueError(f'context_window must be None or {WHOLE_MAP!r} (the whole map), a '
                         f'positive int or a pair (rows, columns) of positive ints, in {unit}; '
                         f'got {window!r}')
    return int(sides[0]), int(sides[1])


def window_starts(positions: Tensor, length: Union[int, torch.SymInt],
                  window: Union[int, torch.SymInt]) -> Tensor:
    """The first cell of the window each position sees along one axis.

    The window of ``window`` cells (at most ``length``) has the position at its cell
    ``(window - 1) // 2``, shifted inside the axis at its ends, so that positions near a
    border see the map's first (last) ``window`` cells, as a crop's border positions do.

    Args:
        positions (Tensor): (P, ) int64 positions on the axis.
        length (int | SymInt): The axis' length (symbolic in a graph traced for any size).
        window (int | SymInt): The window's length along the axis.

    Returns:
        Tensor: (P, ) int64 window starts.
    """
    # sym_min, not min: a traced graph keeps it as a minimum instead of a branch on the size.
    window = torch.sym_min(window, length)
    return (positions - (window - 1) // 2).clamp(0, length - window)


def window_span(span: Span, length: int, window: int) -> Span:
    """The rows that the windows of the positions ``span`` cover together (:func:`window_starts`
    in plain integers, so that a traced graph holds no data-dependent size)."""
    window = min(window, length)

    def start(position: int) -> int:
        return min(max(position - (window - 1) // 2, 0), length - window)

    return start(span[0]), start(span[1] - 1) + window


class WindowBins(NamedTuple):
    """Along one axis, the (at most two) pooling bins each position's value interpolates.

    Attributes:
        lows (Tensor): (K, P) int64, the first cell of each bin on the axis.
        highs (Tensor): (K, P) int64, one past its last cell.
        weights (Tensor): (K, P) float64, the bin's weight in the position's bilinear
            interpolation (0 where a position interpolates one bin only).
    """
    lows: Tensor
    highs: Tensor
    weights: Tensor


def window_bins(positions: Tensor,
                length: Union[int, torch.SymInt],
                window: int,
                bins: int,
                align_corners: bool,
                dtype: torch.dtype = torch.float32) -> WindowBins:
    """The pooling bins behind each position's pyramid pooling value along one axis.

    In mmseg's ``PPM`` a map of L cells is pooled into ``bins`` adaptive bins (bin i spans
    [floor(i L / bins), ceil((i + 1) L / bins)), as ``adaptive_avg_pool2d``), each bin is
    projected, and the projections are resized back to L cells bilinearly. Here L is the
    position's window and the position's cell in it picks the interpolation weights, taken
    from ``F.interpolate`` itself so that they are the ones mmseg's resize uses.

    Args:
        positions (Tensor): (P, ) int64 positions on the axis.
        length (int | SymInt): The axis' length (symbolic in a graph traced for any size).
        window (int): The window's length along the axis (at most ``length`` is used).
        bins (int): The pooling's output size along the axis.
        align_corners (bool): The resize's ``align_corners``.
        dtype (torch.dtype): The floating dtype the resize would run in (its weights are
            computed in it).

    Returns:
        WindowBins: K = min(2, bins) bins per position.
    """
    window = torch.sym_min(window, length)
    starts = window_starts(positions, length, window)
    identity = torch.eye(bins, dtype=dtype)[None]  # (1, bins, bins): one bin per channel
    # With align_corners a resize to one cell reads bin 0, as the first cell of any longer
    # resize does; resizing to at least 2 cells keeps a traced graph off the one-cell case,
    # which it would compute as 0 / 0 (a window of one cell at a size traced with more).
    size = torch.sym_max(window, 2) if align_corners else window
    resize = F.interpolate(
        identity, size=size, mode='linear', align_corners=align_corners)[0, :, :window]
    weights, index = resize.topk(min(2, bins), dim=0)  # (K, window): the non-zero weights first
    cells = positions - starts
    index, weights = index[:, cells], weights[:, cells].double()
    lows = starts + index * window // bins
    highs = starts - (-(index + 1) * window // bins)  # ceil
    return WindowBins(lows, highs, weights)


def windowed_pyramid_pooling(branches: nn.ModuleList, band: Tensor, band_start: int, span: Span,
                             hw_shape: Tuple[int, int], window: Tuple[int, int],
                             align_corners: bool) -> List[Tensor]:
    """Rows ``span`` of mmseg's ``PPM`` outputs, each position's from a window of the map.

    Every position takes the value mmseg's ``PPM`` gives it on the window of ``window``
    cells around it (:func:`window_starts`: centred, shifted inside the map at its borders):
    each bin of that window is a box mean, read from running sums of the map (a difference
    of four cumulative sums, in float64), projected by the branch's 1 x 1 convolution module,
    and the projections weighted as the bilinear resize weights them (:func:`window_bins`).
    This equals ``PPM`` run on each window alone, up to rounding; a window of the map's size
    is ``PPM`` on the whole map.

    The computation branches on no size: with the whole map as the band, ``hw_shape`` may be
    symbolic (a graph traced for every size, in which a window of ``min(window, H)`` rows
    and ``min(window, W)`` columns is the whole map wherever the map is smaller).

    Args:
        branches (nn.ModuleList): mmseg's ``PPM``: per scale an ``nn.Sequential`` of
            ``AdaptiveAvgPool2d`` and the 1 x 1 ``ConvModule``.
        band (Tensor): (B, C, rows, W) rows ``[band_start, band_start + rows)`` of the map,
            covering :func:`window_span` of ``span``.
        band_start (int): The band's first row in the map.
        span (Span): The output rows, within the map.
        hw_shape (tuple[int, int]): The map's (H, W).
        window (tuple[int, int]): The window's (rows, columns), >= 1 each.
        align_corners (bool): The resize's ``align_corners``.

    Returns:
        list[Tensor]: Per branch (B, channels, span rows, W), in the band's dtype.
    """
    H, W = hw_shape
    # The whole map needs no check (and compares no symbolic sizes, which would be branches).
    if band_start != 0 or tuple(band.shape[2:]) != (H, W) or tuple(span) != (0, H):
        needed = window_span(span, H, window[0])
        if band.shape[3] != W or band_start > needed[0] or \
                band_start + band.shape[2] < needed[1]:
            raise ValueError(f'the band (rows {band_start}-{band_start + band.shape[2]}, '
                             f'{band.shape[3]} columns) must cover rows {needed[0]}-{needed[1]} '
                             f'and the {W} columns of the map for output rows '
                             f'{span[0]}-{span[1]}')
    rows, columns = torch.arange(*span), torch.arange(W)
    with autocast_disabled(band.device.type):
        # Running sums with a leading zero row and column: a box's sum is four reads.
        sums = F.pad(band.double().cumsum(2).cumsum(3), (1, 0, 1, 0))
    outputs = []
    for branch in branches:
        pool, project = branch[0], branch[1]
        size = pool.output_size
        bins = (size, size) if isinstance(size, int) else tuple(size)
        row_bins = window_bins(rows, H, window[0], bins[0], align_corners, band.dtype)
        col_bins = window_bins(columns, W, window[1], bins[1], align_corners, band.dtype)
        row_lows = (row_bins.lows - band_start).to(band.device)
        row_highs = (row_bins.highs - band_start).to(band.device)
        col_lows, col_highs = col_bins.lows.to(band.device), col_bins.highs.to(band.device)
        # Per pair (k, m) of a row bin and a column bin, (K, M, P, W): the weights of the
        # bins' projections and the boxes' areas. A pair of bins that no position
        # interpolates has weight 0 everywhere and adds exactly 0; it is not skipped, which
        # would depend on the data.
        weights = (row_bins.weights[:, None, :, None] * col_bins.weights[None, :, None, :]).to(band)
        areas = (row_highs - row_lows)[:, None, :, None] * (col_highs - col_lows)[None, :, None]
        output = None
        for k in range(len(row_lows)):
            # Advanced indexing: index_select on the last dimension was slower on CPU (about
            # 2x for a 128 x 128 map).
            top, bottom = sums[:, :, row_lows[k]], sums[:, :, row_highs[k]]
            for m in range(len(col_lows)):
                c0, c1 = col_lows[m], col_highs[m]
                box = bottom[..., c1] - top[..., c1] - bottom[..., c0] + top[..., c0]
                term = project((box / areas[k, m]).to(band.dtype)) * weights[k, m]
                output = term if output is None else output + term
        outputs.append(output)
    return outputs
