"""Non-overlapping patch embedding that accepts any input size."""
from typing import Tuple

import torch.nn.functional as F
from torch import Tensor, nn


class PatchEmbed(nn.Module):
    """Split an image into p x p patches and project each to C channels.

    Inputs whose sides are not multiples of p are zero-padded at the bottom and right
    ("corner" padding, as mmcv's PatchEmbed), so the grid is (ceil(H / p), ceil(W / p)).

    Args:
        in_channels (int): Image channels. Defaults to 3.
        embed_dims (int): Output width C. Defaults to 768.
        patch_size (int): Patch side p. Defaults to 16.
    """

    def __init__(self, in_channels: int = 3, embed_dims: int = 768, patch_size: int = 16) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.patch_size = patch_size
        self.projection = nn.Conv2d(
            in_channels, embed_dims, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: Tensor) -> Tuple[Tensor, Tuple[int, int]]:
        """Args:
            x (Tensor): (B, in_channels, H, W) images.

        Returns:
            tuple: tokens (B, N, C) with N = H' * W', and ``hw_shape`` (H', W').
        """
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'expected images of shape (B, {self.in_channels}, H, W), got '
                             f'{tuple(x.shape)}')
        p = self.patch_size
        H, W = x.shape[-2:]
        if H < p or W < p:
            raise ValueError(f'images must be at least one patch ({p}x{p}) large, got {H}x{W}')
        x = F.pad(x, (0, -W % p, 0, -H % p))
        x = self.projection(x)
        hw_shape = (x.shape[2], x.shape[3])
        return x.flatten(2).transpose(1, 2), hw_shape
