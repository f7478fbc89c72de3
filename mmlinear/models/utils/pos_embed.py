"""Learned absolute position embeddings on another patch grid than the table's.

Two policies give a grid its positions (``pos_extrapolation`` of the backbones):

- ``'interpolate'``: the table stretched over the grid (``F.interpolate``), as ViTs are
  usually fine-tuned at another resolution; a grid larger than the table sees its positions
  spread apart.
- ``'tile'``: the table repeated at its own period (token (r, c) takes entry
  (r mod Hs, c mod Ws)), so every window of the table's size sees positions at the spacing it
  was trained with; a grid smaller than the table takes its top-left corner.
"""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from mmlinear.utils.ext_loader import exporting
from .checks import check_choice

#: Interpolation modes whose 2-D result is a 1-D interpolation along W, then one along H.
SEPARABLE_MODES = ('nearest', 'bilinear', 'bicubic')
#: How a position table is laid on a grid of another size (see the module's docstring).
POS_EXTRAPOLATIONS = ('interpolate', 'tile')


def interpolation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a position table is interpolated in: float32, or float64 for float64."""
    return torch.promote_types(dtype, torch.float32)


def resize_pos_embed(pos_embed: Tensor,
                     src_shape: Tuple[int, int],
                     dst_shape: Tuple[int, int],
                     mode: str = 'bicubic',
                     num_extra_tokens: int = 1) -> Tensor:
    """Interpolate the grid part of a position embedding; extra tokens are kept as they are.

    Args:
        pos_embed (Tensor): (1, num_extra_tokens + Hs * Ws, C).
        src_shape (tuple[int, int]): (Hs, Ws), the grid the table was made for.
        dst_shape (tuple[int, int]): (Hd, Wd), the grid of the input.
        mode (str): ``F.interpolate`` mode. Defaults to 'bicubic'.
        num_extra_tokens (int): Leading non-grid tokens (the CLS token). Defaults to 1.

    Returns:
        Tensor: (1, num_extra_tokens + Hd * Wd, C) in the dtype of ``pos_embed``.
    """
    # While a graph is exported the grid may be symbolic, and comparing it with the table's
    # would make the tracer assume the outcome: a dynamic graph traced at the table's own grid
    # would skip the interpolation at every size. So exports always interpolate; at the same
    # grid the interpolation weights are one-hot and return the table exactly.
    if not exporting() and tuple(src_shape) == tuple(dst_shape):
        return pos_embed
    src_h, src_w = src_shape
    if pos_embed.shape[1] != num_extra_tokens + src_h * src_w:
        raise ValueError(f'pos_embed has {pos_embed.shape[1]} tokens, expected '
                         f'{num_extra_tokens} + {src_h}x{src_w}')
    extra, grid = pos_embed[:, :num_extra_tokens], pos_embed[:, num_extra_tokens:]
    C = grid.shape[-1]
    # Interpolate in float32 (float64 for float64): bicubic weights in half precision
    # visibly distort the table.
    grid = grid.to(interpolation_dtype(grid.dtype)).reshape(1, src_h, src_w, C).permute(0, 3, 1, 2)
    align = False if mode in ('bilinear', 'bicubic') else None
    grid = F.interpolate(grid, size=tuple(dst_shape), mode=mode, align_corners=align)
    grid = grid.flatten(2).transpose(1, 2).to(pos_embed.dtype)
    return torch.cat([extra, grid], dim=1)


def tile_pos_embed(pos_embed: Tensor,
                   src_shape: Tuple[int, int],
                   dst_shape: Tuple[int, int],
                   num_extra_tokens: int = 1) -> Tensor:
    """Repeat the grid part of a position embedding at the table's period; extra tokens are
    kept as they are.

    Token (r, c) of the output takes the table's entry (r mod Hs, c mod Ws): the output is
    the table tiled over the grid and cropped to it (its top-left corner for a smaller grid).

    Args:
        pos_embed (Tensor): (1, num_extra_tokens + Hs * Ws, C).
        src_shape (tuple[int, int]): (Hs, Ws), the grid the table was made for.
        dst_shape (tuple[int, int]): (Hd, Wd), the grid of the input.
        num_extra_tokens (int): Leading non-grid tokens (the CLS token). Defaults to 1.

    Returns:
        Tensor: (1, num_extra_tokens + Hd * Wd, C), the table's values (no arithmetic).
    """
    src_h, src_w = src_shape
    if pos_embed.shape[1] != num_extra_tokens + src_h * src_w:
        raise ValueError(f'pos_embed has {pos_embed.shape[1]} tokens, expected '
                         f'{num_extra_tokens} + {src_h}x{src_w}')
    extra, grid = pos_embed[:, :num_extra_tokens], pos_embed[:, num_extra_tokens:]
    grid = grid.reshape(src_h, src_w, -1)
    rows = torch.arange(dst_shape[0], device=grid.device) % src_h
    cols = torch.arange(dst_shape[1], device=grid.device) % src_w
    grid = grid[rows[:, None], cols[None, :]].flatten(0, 1)
    return torch.cat([extra, grid[None]], dim=1)


def pos_embed_on_grid(pos_embed: Tensor,
                      src_shape: Tuple[int, int],
                      dst_shape: Tuple[int, int],
                      extrapolation: str = 'interpolate',
                      mode: str = 'bicubic',
                      num_extra_tokens: int = 1) -> Tensor:
    """The position embedding of a ``dst_shape`` grid under a policy of
    :data:`POS_EXTRAPOLATIONS`.

    Args:
        pos_embed (Tensor): (1, num_extra_tokens + Hs * Ws, C).
        src_shape (tuple[int, int]): (Hs, Ws), the grid the table was made for.
        dst_shape (tuple[int, int]): (Hd, Wd), the grid of the input.
        extrapolation (str): 'interpolate' (:func:`resize_pos_embed`) or 'tile'
            (:func:`tile_pos_embed`). Defaults to 'interpolate'.
        mode (str): ``F.interpolate`` mode of 'interpolate'. Defaults to 'bicubic'.
        num_extra_tokens (int): Leading non-grid tokens (the CLS token). Defaults to 1.

    Returns:
        Tensor: (1, num_extra_tokens + Hd * Wd, C) in the dtype of ``pos_embed``.
    """
    check_choice('pos_extrapolation', extrapolation, POS_EXTRAPOLATIONS)
    if extrapolation == 'tile':
        return tile_pos_embed(pos_embed, src_shape, dst_shape, num_extra_tokens)
    return resize_pos_embed(pos_embed, src_shape, dst_shape, mode, num_extra_tokens)


def pos_embed_for_valid_regions(pos_embed: Tensor,
                                src_shape: Tuple[int, int],
                                valid_shapes: Sequence[Tuple[int, int]],
                                canvas_shape: Tuple[int, int],
                                mode: str = 'bicubic',
                                num_extra_tokens: int = 1,
                                extrapolation: str = 'interpolate') -> Tensor:
    """Per-image position embeddings for a padded batch: the table is laid on each image's
    valid token region (top-left) and the padded tokens get zeros.

    Interpolating to the padded grid instead would make an image's features depend on how
    far its batch was padded.

    Args:
        pos_embed (Tensor): (1, num_extra_tokens + Hs * Ws, C).
        src_shape (tuple[int, int]): (Hs, Ws), the grid the table was made for.
        valid_shapes (Sequence[tuple[int, int]]): (h, w) valid token region of each image.
        canvas_shape (tuple[int, int]): (H, W), the padded token grid.
        mode (str): ``F.interpolate`` mode. Defaults to 'bicubic'.
        num_extra_tokens (int): Leading non-grid tokens (the CLS token). Defaults to 1.
        extrapolation (str): One of :data:`POS_EXTRAPOLATIONS` (see
            :func:`pos_embed_on_grid`). Defaults to 'interpolate'.

    Returns:
        Tensor: (B, num_extra_tokens + H * W, C).
    """
    H, W = canvas_shape
    C = pos_embed.shape[-1]
    canvas = pos_embed.new_zeros(len(valid_shapes), H, W, C)
    for shape in set(valid_shapes):
        h, w = shape
        grid = pos_embed_on_grid(pos_embed, src_shape, shape, extrapolation, mode, num_extra_tokens)
        grid = grid[0, num_extra_tokens:].reshape(h, w, C)
        images = [i for i, s in enumerate(valid_shapes) if s == shape]
        canvas[images, :h, :w] = grid
    extra = pos_embed[:, :num_extra_tokens].expand(len(valid_shapes), -1, -1)
    return torch.cat([extra, canvas.flatten(1, 2)], dim=1)


def interpolation_weights(src_len: int, dst_len: int, mode: str, dtype: torch.dtype) -> Tensor:
    """The 1-D weights ``F.interpolate`` gives each source position, as a matrix.

    Interpolating the rows of an identity gives each output position's weights over the
    sources exactly as ``F.interpolate`` draws them (border clamping included), since a
    separable 2-D interpolation is a 1-D one along each axis.

    Args:
        src_len (int): Source positions.
        dst_len (int): Output positions.
        mode (str): One of ``SEPARABLE_MODES``.
        dtype (torch.dtype): Float dtype of the result.

    Returns:
        Tensor: (dst_len, src_len); output = weights @ source along that axis.
    """
    identity = torch.eye(src_len, dtype=dtype).reshape(1, src_len, src_len, 1)
    align = False if mode in ('bilinear', 'bicubic') else None
    weights = F.interpolate(identity, size=(dst_len, 1), mode=mode, align_corners=align)
    return weights[0, :, :, 0].t()


def tiling_weights(src_len: int, dst_len: int, dtype: torch.dtype) -> Tensor:
    """The 1-D weights of the table repeated at its period, as a matrix: output position i
    takes source position i mod ``src_len`` with weight one.

    Args:
        src_len (int): Source positions.
        dst_len (int): Output positions.
        dtype (torch.dtype): Float dtype of the result.

    Returns:
        Tensor: (dst_len, src_len) one-hot rows; output = weights @ source along that axis.
    """
    return torch.eye(src_len, dtype=dtype)[torch.arange(dst_len) % src_len]


def axis_weights(extrapolation: str, src_len: int, dst_len: int, mode: str,
                 dtype: torch.dtype) -> Tensor:
    """The 1-D weights of a policy of :data:`POS_EXTRAPOLATIONS` along one axis.

    Args:
        extrapolation (str): 'interpolate' (:func:`interpolation_weights`) or 'tile'
            (:func:`tiling_weights`).
        src_len (int): Source positions.
        dst_len (int): Output positions.
        mode (str): One of ``SEPARABLE_MODES``, for 'interpolate'.
        dtype (torch.dtype): Float dtype of the result.

    Returns:
        Tensor: (dst_len, src_len); output = weights @ source along that axis.
    """
    if extrapolation == 'tile':
        return tiling_weights(src_len, dst_len, dtype)
    return interpolation_weights(src_len, dst_len, mode, dtype)


class TablePosEmbed:
    """The rows of a position table already interpolated to the token grid, as
    :class:`BandPosEmbed` gives them without the table.

    Args:
        table (Tensor): (1 or B, num_extra_tokens + H' * W', C).
        canvas_shape (tuple[int, int]): (H', W'), the token grid.
        num_extra_tokens (int): Leading non-grid tokens. Defaults to 1.
    """

    def __init__(self,
                 table: Tensor,
                 canvas_shape: Tuple[int, int],
                 num_extra_tokens: int = 1) -> None:
        self.canvas_shape = tuple(canvas_shape)
        self.extra = table[:, :num_extra_tokens]
        self.grid = table[:, num_extra_tokens:]

    def rows(self, start: int, stop: int) -> Tensor:
        """The grid positions of token rows [start, stop).

        Returns:
            Tensor: (1 or B, (stop - start) * W', C), a view of the table.
        """
        width = self.canvas_shape[1]
        return self.grid[:, start * width:stop * width]


class BandPosEmbed:
    """The rows of a position table laid on the grid, one band of grid rows at a time.

    Equals the rows of :func:`pos_embed_on_grid` (or, with ``valid_shapes``,
    :func:`pos_embed_for_valid_regions`) without the whole (H' * W', C) table: both policies
    are separable, one 1-D map along W and one along H (the interpolation's weights, or the
    tiling's one-hot ones). The table is mapped along W once (Hs x W' x C, small), and each
    output row then takes the weights of its source rows along H. (Interpolating a cropped
    table instead would move every sample point.) Tiling's weights are one-hot, so its rows
    are the table's values exactly.

    Args:
        pos_embed (Tensor): (1, num_extra_tokens + Hs * Ws, C).
        src_shape (tuple[int, int]): (Hs, Ws), the grid the table was made for.
        canvas_shape (tuple[int, int]): (H', W'), the token grid.
        valid_shapes (Sequence[tuple[int, int]], optional): (h, w) valid token region of
            each image of a padded batch; padded tokens get zeros. Defaults to None (the
            whole grid, one table for the batch).
        mode (str): One of ``SEPARABLE_MODES``, for 'interpolate'. Defaults to 'bicubic'.
        num_extra_tokens (int): Leading non-grid tokens. Defaults to 1.
        extrapolation (str): One of :data:`POS_EXTRAPOLATIONS`. Defaults to 'interpolate'.
    """

    def __init__(self,
                 pos_embed: Tensor,
                 src_shape: Tuple[int, int],
                 canvas_shape: Tuple[int, int],
                 valid_shapes: Optional[Sequence[Tuple[int, int]]] = None,
                 mode: str = 'bicubic',
                 num_extra_tokens: int = 1,
                 extrapolation: str = 'interpolate') -> None:
        check_choice('pos_extrapolation', extrapolation, POS_EXTRAPOLATIONS)
        if extrapolation == 'interpolate' and mode not in SEPARABLE_MODES:
            raise ValueError(f'band-wise position tables need a separable interpolate_mode; '
                             f'allowed: {", ".join(map(repr, SEPARABLE_MODES))}, got {mode!r}')
        self.dtype = pos_embed.dtype
        self.canvas_shape = tuple(canvas_shape)
        self.extra = pos_embed[:, :num_extra_tokens]
        src_h, src_w = src_shape
        acc = interpolation_dtype(pos_embed.dtype)
        grid = pos_embed[0, num_extra_tokens:].to(acc).reshape(src_h, src_w, -1)
        shapes = [self.canvas_shape] if valid_shapes is None else [tuple(s) for s in valid_shapes]
        H, W = self.canvas_shape
        # Per image: row weights (H', Hs), zero below its valid rows, and the table along W
        # (Hs, W', C), zero right of its valid columns.
        self.row_weights = grid.new_zeros(len(shapes), H, src_h)
        self.columns = grid.new_zeros(len(shapes), src_h, W, grid.shape[-1])
        for i, (h, w) in enumerate(shapes):
            self.row_weights[i, :h] = axis_weights(extrapolation, src_h, h, mode, acc)
            self.columns[i, :, :w] = torch.einsum('wv,hvc->hwc',
                                                  axis_weights(extrapolation, src_w, w, mode, acc),
                                                  grid)

    def rows(self, start: int, stop: int) -> Tensor:
        """The grid positions of token rows [start, stop).

        Returns:
            Tensor: (B or 1, (stop - start) * W', C) in the table's dtype.
        """
        band = torch.einsum('brh,bhwc->brwc', self.row_weights[:, start:stop], self.columns)
        return band.flatten(1, 2).to(self.dtype)
