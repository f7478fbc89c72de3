"""Token-level padding masks for batches that mmdet / mmseg pad."""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


def pixel_padding_mask(img_shapes: Sequence[Tuple[int, int]], batch_shape: Tuple[int, int],
                       device: Optional[torch.device] = None) -> Tensor:
    """Build a (B, H, W) mask, True on the padded pixels of each image.

    Args:
        img_shapes (Sequence[tuple[int, int]]): (h, w) of each image's valid region, as the
            data samples' ``img_shape``.
        batch_shape (tuple[int, int]): (H, W) of the padded batch.
        device (torch.device, optional): Device of the mask.

    Returns:
        Tensor: (B, H, W) bool.
    """
    H, W = batch_shape
    rows = torch.arange(H, device=device)[None, :, None]
    cols = torch.arange(W, device=device)[None, None, :]
    heights = torch.tensor([s[0] for s in img_shapes], device=device)[:, None, None]
    widths = torch.tensor([s[1] for s in img_shapes], device=device)[:, None, None]
    return (rows >= heights) | (cols >= widths)


def token_padding_mask(pixel_mask: Tensor, patch_size: int) -> Tensor:
    """Reduce a pixel mask to patches: a patch is padding only if all its pixels are.

    Args:
        pixel_mask (Tensor): (B, H, W) bool, True on padded pixels.
        patch_size (int): Patch side p; partial patches at the border count as in
            ``PatchEmbed`` (grid ceil(H / p) x ceil(W / p)).

    Returns:
        Tensor: (B, ceil(H / p) * ceil(W / p)) bool, True on padded tokens.
    """
    valid = (~pixel_mask).float().unsqueeze(1)
    valid = F.max_pool2d(valid, patch_size, patch_size, ceil_mode=True)
    return (valid == 0).flatten(1)
