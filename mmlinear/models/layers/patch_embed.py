"""Non-overlapping patch embedding that accepts any input size and loads weights made for
another number of input channels."""
from typing import Tuple

import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from torch import Tensor, nn

from mmlinear.utils.deprecation import renamed_attributes
from ..utils import autocast_dtype


def adapt_input_channels(weight: Tensor, in_channels: int) -> Tensor:
    """Patch-embedding weights of S input channels made for ``in_channels`` = N channels.

    N > S keeps the S channels' weights and gives each extra channel their mean; N < S gives
    every channel the mean; either way all are scaled by S / N. The sum over channels is
    kept, so an image whose channels are all equal (a grey RGB image, or N copies of one
    channel) embeds exactly as before: the adapted model starts where the S-channel one was,
    and the new channels are learnt from there.

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


__getattr__ = renamed_attributes(globals(), dict(adapt_input_bands='adapt_input_channels'))


class PatchEmbed(nn.Module):
    """Split an image into p x p patches and project each to C channels.

    Inputs whose sides are not multiples of p are zero-padded at the bottom and right
    ("corner" padding, as mmcv's PatchEmbed), so the grid is (ceil(H / p), ceil(W / p)).
    A checkpoint made for another number of channels (RGB weights for a 4-channel model) loads
    through :func:`adapt_input_channels`, with a message saying so.

    The projection is a convolution whose kernel equals its stride, i.e. one matrix product
    of the gathered patches (B * N, C_in * p * p) with its flattened weight, and it runs as
    that product: its memory is the gathered copy of the input and the product's output,
    whatever the CPU, where a library's convolution may take a workspace that grows with
    the image (oneDNN's bf16 kernel on a Xeon with AMX: 20 to 400 bytes per pixel), which
    streamed inference's memory model could not count (docs/design.md, "Streamed
    inference"). The convolution module holds the weights (the checkpoints' keys).

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
            state_dict[key] = adapt_input_channels(weight, self.in_channels)
            how = (f'its {source} kept, {self.in_channels - source} more from their mean'
                   if self.in_channels > source else 'each channel their mean')
            print_log(
                f'{key}: the checkpoint takes {source} input channels, the model '
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
        return self.project(F.pad(x, (0, -W % p, 0, -H % p)))

    def project(self, x: Tensor) -> Tuple[Tensor, Tuple[int, int]]:
        """The tokens of images made of whole patches (what :meth:`forward` does after
        padding; streamed inference pads each band itself and calls this).

        Args:
            x (Tensor): (B, in_channels, H' * p, W' * p) images.

        Returns:
            tuple: tokens (B, N, C) with N = H' * W', and ``hw_shape`` (H', W').
        """
        p = self.patch_size
        # (B, C_in, H', p, W', p) -> (B, H', W', C_in, p, p): the weight's (C_in, p, p) order.
        grid = x.unflatten(3, (-1, p)).unflatten(2, (-1, p)).permute(0, 2, 4, 1, 3, 5)
        # Autocast would cast the gathered patches to its dtype; gathering straight into that
        # dtype casts on the way and keeps one narrow copy, not a wide one and a narrow one.
        narrowed = autocast_dtype(x.device.type)
        dtype = narrowed if narrowed is not None and x.dtype != torch.float64 else x.dtype
        patches = grid.new_empty(grid.shape, dtype=dtype).copy_(grid)
        tokens = F.linear(
            patches.flatten(3).flatten(1, 2), self.projection.weight.flatten(1),
            self.projection.bias)
        return tokens, (grid.shape[1], grid.shape[2])
