"""Linear-InfSA's summary over a window of the patch grid around each token instead of the whole
grid (see docs/large_images.md, "Context window of Linear-InfSA")."""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from mmlinear.ops.infsa_common import scale_float32
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


def _starts(positions: Tensor, lengths: Tensor, window: int) -> Tuple[Tensor, Tensor]:
    """Per image of a padded batch, :func:`window_starts` along an axis of the image's valid
    length, and the window's length there (at most that valid length).

    Args:
        positions (Tensor): (P, ) int64 positions.
        lengths (Tensor): (B, ) int64 valid lengths of the axis, on the CPU.
        window (int): The window's length.

    Returns:
        tuple[Tensor, Tensor]: (B, P) starts and (B, 1) window lengths.
    """
    starts = torch.stack([window_starts(positions, int(length), window) for length in lengths])
    return starts, lengths.clamp(max=window)[:, None]


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
        extents (Tensor): (B, 2) the images' valid regions (:func:`image_extents`).

    Returns:
        Tensor: (B, (span rows) * W', H, d) ``sum_j a_ij v_j`` in float32 (float64 for
        float64 inputs).
    """
    B, n, H, d = q.shape
    W = hw_shape[1]
    band_rows = n // W
    needed = window_input_rows(span, extents, window[0])
    if band_start > needed[0] or band_start + band_rows < needed[1]:
        raise ValueError(f'the band (rows {band_start}-{band_start + band_rows}) must cover rows '
                         f'{needed[0]}-{needed[1]} for output rows {span[0]}-{span[1]}')
    device = q.device
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
        row_starts, row_sides = _starts(torch.arange(*span), extents[:, 0], window[0])
        col_starts, col_sides = _starts(torch.arange(W), extents[:, 1], window[1])
        row_starts, row_sides = (row_starts - band_start).to(device), row_sides.to(device)
        col_starts, col_sides = col_starts.to(device), col_sides.to(device)
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
        grid = (band_rows, W, H, d)
        for b in range(B):
            # Image by image: each has its windows' sides, and one row (column) of windows
            # for every output row (column), so an offset in the window is two index_selects.
            keys, values = ks[b].reshape(grid), vs[b].reshape(grid)
            keep = None if valid is None else valid[b].view(band_rows, W)
            query, score_total, total = central[b].reshape(-1, W, H, d), score_sum[b], pooled[b]
            for dr in range(int(row_sides[b])):
                rows = row_starts[b] + dr
                row_keys, row_values = keys.index_select(0, rows), values.index_select(0, rows)
                row_keep = None if keep is None else keep.index_select(0, rows)
                for dc in range(int(col_sides[b])):
                    cols = col_starts[b] + dc
                    scores = torch.relu((query * row_keys.index_select(1, cols)).sum(-1))
                    if row_keep is not None:
                        scores = scores * row_keep.index_select(1, cols)[..., None]
                    scores = scores.flatten(0, 1)  # (R W', H)
                    score_total += scores
                    total.addcmul_(scores[..., None],
                                   row_values.index_select(1, cols).flatten(0, 1))
        scale = rho.to(central.dtype).reshape(1, 1, -1) / (score_sum + eps)
        return pooled * scale[..., None]
