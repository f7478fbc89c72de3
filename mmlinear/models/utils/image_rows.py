"""Images read by bands of pixel rows, from a tensor or any array that slices by rows."""
from typing import Any, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from .padding_mask import pixel_to_token_mask


class ImageRows:
    """A (B, C, H, W) image, read a band of rows at a time.

    The source is a tensor or any array-like that has a ``shape`` and slices as
    ``source[:, :, start:stop]`` (a numpy array or memmap, a zarr array, ...): only the rows
    asked for are read, so the whole image never has to be one tensor.

    Args:
        source (Tensor | array-like): (B, C, H, W) floating-point images.
        in_channels (int): The channels the model takes.
    """

    def __init__(self, source: Any, in_channels: int) -> None:
        shape = tuple(getattr(source, 'shape', ()))
        if len(shape) != 4 or shape[1] != in_channels:
            raise ValueError(f'expected images of shape (B, {in_channels}, H, W), got '
                             f'{shape if shape else type(source).__name__}')
        dtype = source.dtype if isinstance(source, Tensor) else np.dtype(source.dtype)
        floating = dtype.is_floating_point if isinstance(dtype, torch.dtype) else \
            np.issubdtype(dtype, np.floating)
        if not floating:
            raise TypeError(f'expected floating-point images (B, C, H, W), normalised as the '
                            f'data preprocessor does, got dtype {dtype}')
        self.source = source
        self.shape: Tuple[int, int, int, int] = shape

    def read(self, start: int, stop: int, device: torch.device, dtype: torch.dtype) -> Tensor:
        """Pixel rows [start, stop) of every image.

        Returns:
            Tensor: (B, C, stop - start, W) of ``dtype`` on ``device``.
        """
        rows = self.source[:, :, start:stop]
        if not isinstance(rows, Tensor):
            rows = torch.from_numpy(np.ascontiguousarray(rows))
        return rows.to(device=device, dtype=dtype)


def streamed_token_padding_mask(padding_mask: Optional[Tensor], image_shape: Tuple[int, ...],
                                patch_size: int) -> Optional[Tensor]:
    """Check a pixel padding mask and reduce it to patch tokens a band of patch rows at a
    time (the pixel mask may be large; its token reduction is p^2 times smaller).

    Args:
        padding_mask (Tensor, optional): (B, H, W) bool, True on padded pixels.
        image_shape (tuple[int, ...]): (B, C, H, W) of the image.
        patch_size (int): p.

    Returns:
        Tensor | None: (B, ceil(H / p) * ceil(W / p)) bool, True on padded patches.
    """
    if padding_mask is None:
        return None
    expected = (image_shape[0], *image_shape[2:])
    if not isinstance(padding_mask, Tensor) or tuple(padding_mask.shape) != expected:
        raise ValueError(f'padding_mask must be a tensor of shape (B, H, W) = {expected}, got '
                         f'{tuple(getattr(padding_mask, "shape", ()))}')
    if padding_mask.dtype != torch.bool:
        raise TypeError(f'padding_mask must be a bool tensor (True on padded pixels), got '
                        f'dtype {padding_mask.dtype}')
    # Bands of whole patch rows reduce exactly as the whole mask does.
    step = patch_size * 256
    bands = [
        pixel_to_token_mask(padding_mask[:, start:start + step], patch_size)
        for start in range(0, expected[1], step)
    ]
    B = expected[0]
    return torch.cat([band.view(B, -1) for band in bands], dim=1)
