"""Images read by bands of pixel rows, from a tensor or any array that slices by rows."""
from typing import Any, Tuple

import numpy as np
import torch
from torch import Tensor


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
