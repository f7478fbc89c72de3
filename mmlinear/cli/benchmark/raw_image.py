"""A (B, C, H, W) float32 image in a raw file, written and read by rows without mapping it."""
import os
from typing import Tuple

import numpy as np


class RawImageFile:
    """Row bands of an image stored as raw C-order float32, read with ``pread``.

    A streamed forward reads its input a band at a time; reading through the file (not a
    memory map, whose touched pages would count in the process's resident set) keeps the
    image out of the process's memory, as a tiled raster reader does.

    Args:
        path (str): The file, ``B * C * H * W`` float32 values.
        shape (tuple[int, int, int, int]): (B, C, H, W).
    """

    dtype = np.dtype(np.float32)

    def __init__(self, path: str, shape: Tuple[int, int, int, int]) -> None:
        expected = int(np.prod(shape)) * self.dtype.itemsize
        if os.path.getsize(path) != expected:
            raise ValueError(f'{path} holds {os.path.getsize(path)} bytes, a {shape} float32 '
                             f'image needs {expected}')
        self.shape = tuple(shape)
        # One descriptor for every read; the file may be unlinked while it is open.
        self._fd = os.open(path, os.O_RDONLY)

    def __del__(self) -> None:
        if getattr(self, '_fd', None) is not None:
            os.close(self._fd)

    @classmethod
    def write_random(cls,
                     path: str,
                     shape: Tuple[int, int, int, int],
                     seed: int = 0,
                     rows_per_write: int = 256) -> 'RawImageFile':
        """Write a standard-normal image a few rows at a time (never the whole image in
        memory) and open it."""
        B, C, H, W = shape
        rng = np.random.default_rng(seed)
        with open(path, 'wb') as f:
            for _ in range(B * C):
                for start in range(0, H, rows_per_write):
                    rows = min(rows_per_write, H - start)
                    f.write(rng.standard_normal((rows, W), dtype=np.float32).tobytes())
        return cls(path, shape)

    def __getitem__(self, index: Tuple[slice, slice, slice]) -> np.ndarray:
        """``image[:, :, start:stop]``: the rows [start, stop) of every plane."""
        if not isinstance(index, tuple) or len(index) != 3 or index[:2] != (slice(None), ) * 2:
            raise IndexError('RawImageFile reads bands of rows: image[:, :, start:stop]')
        B, C, H, W = self.shape
        start, stop, _ = index[2].indices(H)
        out = np.empty((B, C, stop - start, W), dtype=self.dtype)
        row_bytes = W * self.dtype.itemsize
        planes = out.reshape(B * C, stop - start, W)
        for plane in range(B * C):
            data = os.pread(self._fd, (stop - start) * row_bytes, (plane * H + start) * row_bytes)
            planes[plane] = np.frombuffer(data, dtype=self.dtype).reshape(stop - start, W)
        return out
