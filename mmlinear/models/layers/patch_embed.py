"""Non-overlapping patch embedding that accepts any input size and loads weights made for
another number of input bands."""
from typing import Tuple

import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from torch import Tensor, nn


def adapt_input_bands(weight: Tensor, in_channels: int) -> Tensor:
    """Patch-embedding weights of S input bands made for ``in_channels`` = N bands.

    N > S keeps the S bands' weights and gives each extra band their mean; N < S gives every
    band the mean; either way all are scaled by S / N. The sum over bands is kept, so an
    image whose bands are all equal (a grey RGB image, or N copies of one band) embeds
    exactly as before: the adapted model starts where the S-band one was, and the new bands
    are learnt from there.

    Args:
        weight (Tensor): (C, S, p, p).
        in_channels (int): N.

    Returns:
        Tensor: (C, N, p, p), in ``weight``'s dtype.
    """
    source = weight.shape[1]
    mean = weight.mean(1, keepdim=True)
    if in_channels > source:
        extra = mean.expand(-1, in_channels - source, -1, -1)
        adapted = torch.cat([weight, extra], 1)
    else:
        adapted = mean.expand(-1, in_channels, -1, -1)
    return adapted * (source / in_channels)


class PatchEmbed(nn.Module):
    """Split an image into p x p patches and project each to C channels.

    Inputs whose sides are not multiples of p are zero-padded at the bottom and right
    ("corner" padding, as mmcv's PatchEmbed), so the grid is (ceil(H / p), ceil(W / p)).
    A checkpoint made for another number of bands (RGB weights for a 4-band model) loads
    through :func:`adapt_input_bands`, with a message saying so.

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

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        name = next(n for n, child in self.named_children() if child is self.projection)
        key = f'{prefix}{name}.weight'
        weight = state_dict.get(key)
        if weight is not None and weight.dim() == 4 and weight.shape[1] != self.in_channels:
            source = weight.shape[1]
            state_dict[key] = adapt_input_bands(weight, self.in_channels)
            how = (f'its {source} kept, {self.in_channels - source} more from their mean'
                   if self.in_channels > source else 'each band their mean')
            print_log(
                f'{key}: the checkpoint takes {source} input bands, the model '
                f'{self.in_channels}; adapted ({how}, all scaled by {source}/'
                f'{self.in_channels})',
                logger='current')
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

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
