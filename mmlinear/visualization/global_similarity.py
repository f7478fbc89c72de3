"""How similar a backbone's global token is to each of its patch tokens (the cosine maps of
VECA's Fig. 1(c), top), and how that similarity splits between objects and background."""
from typing import Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


def global_patch_cosine(global_token: Tensor, patches: Tensor) -> Tensor:
    """Cosine similarity between an image's global token and every one of its patch tokens.

    Args:
        global_token (Tensor): (B, C) global tokens (VECA's core 0, a ViT's class token).
        patches (Tensor): (B, C, H', W') patch tokens of the same images, as maps.

    Returns:
        Tensor: (B, H', W') float32 cosine per patch, in [-1, 1].
    """
    if global_token.ndim != 2 or patches.ndim != 4 or \
            global_token.shape != patches.shape[:2]:
        raise ValueError(f'global_token must be (B, C) and patches (B, C, H\', W\') with the '
                         f'same B and C, got {tuple(global_token.shape)} and '
                         f'{tuple(patches.shape)}')
    return F.cosine_similarity(
        patches.float(), global_token.float()[:, :, None, None], dim=1, eps=1e-6)


def foreground_background_cosine(cosine: Tensor,
                                 labels: Tensor,
                                 background: int = 0) -> Tuple[Tensor, Tensor]:
    """The mean cosine over an image's object patches and over its background patches.

    A patch is an object patch when more than half of its pixels carry a label other than
    ``background``. The patch side is ceil(H / H') (and likewise for W), and the label map
    is padded with ``background`` at the bottom and right to whole patches, as a patch
    embedding pads the image.

    Args:
        cosine (Tensor): (B, H', W') cosine maps (:func:`global_patch_cosine`).
        labels (Tensor): (B, H, W) integer label maps of the same images at pixel
            resolution, H >= H' and W >= W'.
        background (int): The label of the background. Defaults to 0.

    Returns:
        tuple[Tensor, Tensor]: (B,) mean cosine over the object patches and (B,) over the
        background patches; NaN for an image that has none of them.
    """
    grid = cosine.shape[1:]
    if labels.ndim != 3 or labels.shape[0] != cosine.shape[0] or \
            labels.shape[1] < grid[0] or labels.shape[2] < grid[1]:
        raise ValueError(f'labels must be (B, H, W) of the cosine maps\' B images, at least '
                         f'as large as their grid {tuple(grid)}, got {tuple(labels.shape)}')
    pad_h = -(-labels.shape[1] // grid[0]) * grid[0] - labels.shape[1]
    pad_w = -(-labels.shape[2] // grid[1]) * grid[1] - labels.shape[2]
    objects = F.pad((labels != background).float(), (0, pad_w, 0, pad_h))
    share = F.avg_pool2d(objects[:, None],
                         (objects.shape[1] // grid[0], objects.shape[2] // grid[1]))[:, 0]
    objects = share > 0.5
    cosine = cosine.float()
    nan = torch.tensor(float('nan'))

    def mean_over(mask: Tensor) -> Tensor:
        count = mask.flatten(1).sum(1)
        total = (cosine * mask).flatten(1).sum(1)
        return torch.where(count > 0, total / count.clamp(min=1), nan)

    return mean_over(objects), mean_over(~objects)


def map_correlation(maps: Tensor, others: Tensor) -> Tensor:
    """Pearson correlation, image by image, between two models' maps of the same images.

    ``others`` is resampled (bilinear) to the grid of ``maps`` when the two models' patch
    grids differ (e.g. 8- and 16-pixel patches).

    Args:
        maps (Tensor): (B, H', W') maps of one model.
        others (Tensor): (B, H'', W'') maps of another model on the same images.

    Returns:
        Tensor: (B,) float32 correlation per image, in [-1, 1] (NaN for a constant map).
    """
    if maps.ndim != 3 or others.ndim != 3 or maps.shape[0] != others.shape[0]:
        raise ValueError(f'maps must be (B, H\', W\') of the same B, got {tuple(maps.shape)} '
                         f'and {tuple(others.shape)}')
    if others.shape[1:] != maps.shape[1:]:
        others = F.interpolate(
            others.float()[:, None], size=maps.shape[1:], mode='bilinear', align_corners=False)[:,
                                                                                                0]
    a = maps.float().flatten(1)
    b = others.float().flatten(1)
    a = a - a.mean(1, keepdim=True)
    b = b - b.mean(1, keepdim=True)
    return (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1))
