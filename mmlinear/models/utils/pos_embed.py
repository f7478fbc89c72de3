"""Resizing of learned absolute position embeddings to another patch grid."""
from typing import Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


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
    if tuple(src_shape) == tuple(dst_shape):
        return pos_embed
    src_h, src_w = src_shape
    if pos_embed.shape[1] != num_extra_tokens + src_h * src_w:
        raise ValueError(f'pos_embed has {pos_embed.shape[1]} tokens, expected '
                         f'{num_extra_tokens} + {src_h}x{src_w}')
    extra, grid = pos_embed[:, :num_extra_tokens], pos_embed[:, num_extra_tokens:]
    C = grid.shape[-1]
    # Interpolate in float32: bicubic weights in half precision visibly distort the table.
    grid = grid.float().reshape(1, src_h, src_w, C).permute(0, 3, 1, 2)
    align = False if mode in ('bilinear', 'bicubic') else None
    grid = F.interpolate(grid, size=tuple(dst_shape), mode=mode, align_corners=align)
    grid = grid.flatten(2).transpose(1, 2).to(pos_embed.dtype)
    return torch.cat([extra, grid], dim=1)


def pos_embed_for_valid_regions(pos_embed: Tensor,
                                src_shape: Tuple[int, int],
                                valid_shapes: Sequence[Tuple[int, int]],
                                canvas_shape: Tuple[int, int],
                                mode: str = 'bicubic',
                                num_extra_tokens: int = 1) -> Tensor:
    """Per-image position embeddings for a padded batch: the table is interpolated to each
    image's valid token region (top-left) and the padded tokens get zeros.

    Interpolating to the padded grid instead would make an image's features depend on how
    far its batch was padded.

    Args:
        pos_embed (Tensor): (1, num_extra_tokens + Hs * Ws, C).
        src_shape (tuple[int, int]): (Hs, Ws), the grid the table was made for.
        valid_shapes (Sequence[tuple[int, int]]): (h, w) valid token region of each image.
        canvas_shape (tuple[int, int]): (H, W), the padded token grid.
        mode (str): ``F.interpolate`` mode. Defaults to 'bicubic'.
        num_extra_tokens (int): Leading non-grid tokens (the CLS token). Defaults to 1.

    Returns:
        Tensor: (B, num_extra_tokens + H * W, C).
    """
    H, W = canvas_shape
    C = pos_embed.shape[-1]
    canvas = pos_embed.new_zeros(len(valid_shapes), H, W, C)
    for shape in set(valid_shapes):
        h, w = shape
        grid = resize_pos_embed(pos_embed, src_shape, shape, mode, num_extra_tokens)
        grid = grid[0, num_extra_tokens:].reshape(h, w, C)
        images = [i for i, s in enumerate(valid_shapes) if s == shape]
        canvas[images, :h, :w] = grid
    extra = pos_embed[:, :num_extra_tokens].expand(len(valid_shapes), -1, -1)
    return torch.cat([extra, canvas.flatten(1, 2)], dim=1)
