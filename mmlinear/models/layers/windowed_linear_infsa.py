"""Linear-InfSA's summary over a window of the patch grid around each token instead of the whole
grid (see docs/large_images.md, "Context window of Linear-InfSA")."""
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from mmlinear.ops.infsa_common import scale_float32
from mmlinear.utils.ext_loader import exporting
from mmlinear.utils.precision import autocast_disabled
from ..utils import valid_extents
from ..utils.windowed_pyramid_pooling import Span, window_span, window_starts

#: The unit of a backbone's context window, for error messages.
TOKEN_WINDOW_UNIT = 'tokens of the patch grid'
#: A window's (rows, columns).
Window = Tuple[int, int]
#: Queries, keys and values of some tokens, each (B, n, H, d).
HeadTokens = Tuple[Tensor, Tensor, Tensor]


def covers_grid(window: Optional[Window], hw_shape: Tuple[int, int]) -> bool:
    """Whether a window sees the whole grid from every token (None: the whole grid)."""
    return window is None or (window[0] >= hw_shape[0] and window[1] >= hw_shape[1])


def image_extents(token_padding_mask: Optional[Tensor], hw_shape: Tuple[int, int],
                  batch: int) -> Tensor:
    """(B, 2) int64 rows and columns of each image's valid region (the grid without a mask),
    on the CPU: the windows are placed inside it, so that padding a batch further leaves an
    image's windows as they are."""
    if token_padding_mask is None:
        return torch.tensor([hw_shape], dtype=torch.int64).expand(batch, 2)
    return valid_extents(token_padding_mask, hw_shape).cpu()


def window_input_rows(span: Span, extents: Tensor, window_rows: int) -> Span:
    """The grid rows that the windows of output rows ``span`` cover, over every image of the
    batch (:func:`window_span` of each image's valid rows, put together).

    Args:
        span (Span): (start, stop) output rows.
        extents (Tensor): (B, 2) the images' valid regions (:func:`image_extents`).
        window_rows (int): The window's rows.

    Returns:
        Span: (start, stop) rows.
    """
    spans = [window_span(span, int(length), window_rows) for length in extents[:, 0].unique()]
    return min(s[0] for s in spans), max(s[1] for s in spans)


def _axis_windows(positions: Tensor, length: Union[int, torch.SymInt],
                  window: int) -> Tuple[Tensor, Tensor]:
    """:func:`window_starts` along an axis of ``length`` cells, and the window's length there
    (at most ``length``) as a (1,) tensor: a size the graph computes, where a plain minimum
    of a symbolic length would be fixed at the traced size.

    Args:
        positions (Tensor): (P, ) int64 positions.
        length (int | SymInt): The axis' (valid) length.
        window (int): The window's length.

    Returns:
        tuple[Tensor, Tensor]: (P, ) starts and (1,) window length.
    """
    side = torch.arange(length, device=positions.device).clamp(max=window - 1)[-1:] + 1
    return window_starts(positions, length, window), side


def _pool_window_offsets(query: Tensor, keys: Tensor, values: Tensor, keep: Optional[Tensor],
                         starts: Tuple[Tensor, Tensor], sides: Tuple[Tensor, Tensor],
                         window: Window, score_sum: Tensor, pooled: Tensor) -> None:
    """Add every offset of the windows to the key scores and the pooled values, in place.

    The images of the batch share their windows: the token at output row i, column j takes
    the keys of rows ``starts[0][i] + dr`` and columns ``starts[1][j] + dc`` for each
    offset in the window, so an offset is two ``index_select`` calls. In a graph that holds at
    every size the offsets run over the whole ``window`` and those beyond the window's
    sides at the graph's size (a grid smaller than the window) score 0; otherwise over the
    sides only.

    Args:
        query (Tensor): (b, R, W', H, d) central queries of the R output rows.
        keys (Tensor): (b, n_r, W', H, d) scaled keys of the band's rows.
        values (Tensor): (b, n_r, W', H, d) values of the same tokens.
        keep (Tensor, optional): (b, n_r, W') bool, False on padded tokens.
        starts (tuple[Tensor, Tensor]): (R,) row and (W',) column window starts.
        sides (tuple[Tensor, Tensor]): (1,) the windows' rows and columns.
        window (Window): The window's (rows, columns).
        score_sum (Tensor): (b, R W', H) the key scores' sums, added to.
        pooled (Tensor): (b, R W', H, d) the score-weighted values, added to.
    """
    whole_window = exporting()
    counts = window if whole_window else (int(sides[0]), int(sides[1]))
    b, R, W = query.shape[:3]

    # The gathers run on 3-D views, (b, rows, rest) and (b R, W', rest): on a CPU,
    # index_select along dim 1 of those is as fast as the 4-D gathers of one image, along
    # dim 2 of the 5-D tensors about 1.3 times slower (measured on an AMD EPYC).
    def columns(t: Tensor, cols: Tensor) -> Tensor:  # (b, R, W', ...) at columns ``cols``
        return t.reshape(b * R, W, -1).index_select(1, cols).view(t.shape)

    for dr in range(counts[0]):
        rows = starts[0] + dr
        if whole_window:  # past the side: the first row again, scored 0 below
            row_in = dr < sides[0]
            rows = torch.where(row_in, rows, starts[0])
        row_keys, row_values, row_keep = (None if t is None else t.flatten(2).index_select(
            1, rows).view(b, R, *t.shape[2:]) for t in (keys, values, keep))
        for dc in range(counts[1]):
            cols = starts[1] + dc
            if whole_window:
                col_in = dc < sides[1]
                cols = torch.where(col_in, cols, starts[1])
            scores = torch.relu((query * columns(row_keys, cols)).sum(-1))
            if row_keep is not None:
                scores = scores * columns(row_keep, cols)[..., None]
            if whole_window:
                scores = scores * (row_in & col_in)
            scores = scores.flatten(1, 2)  # (b, R W', H)
            score_sum += scores
            pooled.addcmul_(scores[..., None], columns(row_values, cols).flatten(1, 2))


def windowed_linear_infsa(q: Tensor, k: Tensor, v: Tensor, extra: Optional[HeadTokens],
                          key_padding_mask: Optional[Tensor], rho: Tensor, eps: float, *,
                          band_start: int, span: Span, hw_shape: Tuple[int, int], window: Window,
                          extents: Tensor) -> Tensor:
    """Linear-InfSA's pooled values of output rows ``span``, each token's from its window.

    Token i at (r, c) takes the window of ``window`` tokens placed as the head's windows are
    placed (``window_starts``: centred, shifted inside the image's valid region at its
    borders), plus the E extra tokens (CLS), which every window holds as every training crop
    holds them. Over that set S_i it computes what Linear-InfSA computes over a whole
    sequence: the central query ``q_bar_i = sum_{j in S_i} e_j s_j / (sum_{j in S_i} e_j +
    eps)`` (``s_j = q_j / sqrt(d)``, ``e_j = ||s_j||``), a box sum read from running sums (in
    float64), then the key scores ``relu(q_bar_i . k_j / sqrt(d))`` over S_i and the pooled
    value ``rho * sum_j score_ij v_j / (sum_j score_ij + eps)``, exactly, offset by offset of
    the window (the scores depend on q_bar_i through the relu, so they are no box sum):
    O(N w_h w_w H d). Padded tokens take no part.

    Args:
        q (Tensor): (B, n, H, d) queries of grid rows ``[band_start, band_start + n / W')``,
            before scaling; the band covers :func:`window_input_rows` of ``span``.
        k (Tensor): (B, n, H, d) keys of the same tokens, before scaling.
        v (Tensor): (B, n, H, d) values of the same tokens (projected, with the bias).
        extra (tuple[Tensor, Tensor, Tensor], optional): (B, E, H, d) queries, keys and
            values of the extra tokens, or None.
        key_padding_mask (Tensor, optional): (B, n) bool, True on padded tokens.
        rho (Tensor): scalar, (1,) or (H,) decay.
        eps (float): The stabiliser of both normalisations.
        band_start (int): The band's first grid row.
        span (Span): The output rows, within the band.
        hw_shape (tuple[int, int]): The token grid (H', W').
        window (tuple[int, int]): The window's (rows, columns), >= 1 each.
        extents (Tensor, optional): (B, 2) the images' valid regions (:func:`image_extents`);
            None: the grid, for every image.

    Returns:
        Tensor: (B, (span rows) * W', H, d) ``sum_j a_ij v_j`` in float32 (float64 for
        float64 inputs).
    """
    B, n, H, d = q.shape
    W = hw_shape[1]
    band_rows = n // W
    if not exporting():  # (a graph that holds at every size takes the grid as one band)
        needed = (
            window_span(span, hw_shape[0], window[0]) if extents is None else window_input_rows(
                span, extents, window[0]))
        if band_start > needed[0] or band_start + band_rows < needed[1]:
            raise ValueError(f'the band (rows {band_start}-{band_start + band_rows}) must cover '
                             f'rows {needed[0]}-{needed[1]} for output rows {span[0]}-{span[1]}')
    device = q.device
    # Each image's windows lie in its valid region; without a mask the grid, the same for the
    # batch (in symbolic sizes in a graph that holds at every size).
    lengths = [hw_shape] if extents is None else [tuple(e) for e in extents.tolist()]
    windows = [(*_axis_windows(torch.arange(*span, device=device), rows, window[0]),
                *_axis_windows(torch.arange(W, device=device), cols, window[1]))
               for rows, cols in lengths]  # (R,) row starts, (1,) rows, (W',) column ones, (1,)
    with autocast_disabled(device.type):
        qs, ks = scale_float32(q), scale_float32(k)
        vs = v.to(qs.dtype)
        energy = qs.norm(dim=-1)  # (B, n, H)
        valid = None if key_padding_mask is None else ~key_padding_mask
        if valid is not None:
            energy = energy * valid[..., None]
        # The query sums of every window: running sums of [e_j, e_j s_j] with a leading zero
        # row and column, in float64 (long sums of positive energies), four reads a window.
        features = torch.cat([energy[..., None], energy[..., None] * qs], dim=-1)
        sums = F.pad(
            features.reshape(B, band_rows, W, H * (d + 1)).double().cumsum(1).cumsum(2),
            (0, 0, 1, 0, 1, 0))
        # (B, R) row starts, in the band's rows, (B, 1) rows, (B, W') column starts, (B, 1).
        row_starts, row_sides, col_starts, col_sides = (
            torch.stack(part).expand(B, -1) for part in zip(*windows))
        row_starts = row_starts - band_start
        batch = torch.arange(B, device=device)[:, None, None]
        top, bottom = row_starts[:, :, None], (row_starts + row_sides)[:, :, None]
        left, right = col_starts[:, None, :], (col_starts + col_sides)[:, None, :]
        boxes = (sums[batch, bottom, right] - sums[batch, top, right] - sums[batch, bottom, left] +
                 sums[batch, top, left]).to(qs.dtype)
        boxes = boxes.reshape(B, -1, H, d + 1)  # (B, R W', H, d + 1)
        energy_sum, weighted_queries = boxes[..., 0], boxes[..., 1:]
        if extra is not None:
            q_extra = scale_float32(extra[0])
            e_extra = q_extra.norm(dim=-1)  # (B, E, H)
            energy_sum = energy_sum + e_extra.sum(1)[:, None]
            weighted_queries = weighted_queries + (e_extra[..., None] * q_extra).sum(1)[:, None]
        central = weighted_queries / (energy_sum[..., None] + eps)  # (B, R W', H, d)

        score_sum = torch.zeros(central.shape[:-1], dtype=central.dtype, device=device)
        pooled = torch.zeros_like(central)
        if extra is not None:
            scores = torch.relu(torch.einsum('bnhd,behd->bneh', central, scale_float32(extra[1])))
            score_sum += scores.sum(2)
            pooled += torch.einsum('bneh,behd->bnhd', scores, extra[2].to(central.dtype))
        grid = (B, band_rows, W, H, d)
        keys, values = ks.reshape(grid), vs.reshape(grid)
        keep = None if valid is None else valid.view(grid[:3])
        query = central.reshape(B, -1, W, H, d)
        # Image by image (on a CPU about 1.2 times faster than the batch at once, whose
        # working set per offset is B times larger); the batch at once in a graph, whose
        # batch size is symbolic and whose images share their windows.
        for images in [slice(None)] if exporting() else [slice(b, b + 1) for b in range(B)]:
            rows, row_side, cols, col_side = windows[0 if len(windows) == 1 else images.start]
            _pool_window_offsets(query[images], keys[images], values[images],
                                 None if keep is None else keep[images], (rows - band_start, cols),
                                 (row_side, col_side), window, score_sum[images], pooled[images])
        scale = rho.to(central.dtype).reshape(1, 1, -1) / (score_sum + eps)
        return pooled * scale[..., None]
