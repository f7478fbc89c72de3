"""Some bands of a large image, in another order and scaled, read by rows like the image."""
from typing import Any, Sequence

import numpy as np


class BandView:
    """Bands ``bands`` of an (H, W, C) image, in that order, times ``scale``, as an
    (H, W, len(bands)) float32 array-like read by rows.

    It feeds a model trained on other images the bands it knows without reading the image
    whole: e.g. an RGB model trained on mmcv-read (BGR, 8-bit) images sees a 4-band 16-bit
    raster (R, G, B, near-infrared) as ``BandView(raster, (2, 1, 0), 255 / 65535)``.
    ``view[start:stop]`` reads those rows of the source (a
    :class:`~mmlinear.apis.rasters.RasterImage` decodes only the blocks they touch).

    Args:
        source (array-like): An (H, W, C) image sliced by rows as ``source[start:stop]``.
        bands (Sequence[int]): The source's bands to keep, in the order to give them.
        scale (float): Each value is multiplied by it. Defaults to 1.

    Raises:
        ValueError: A source that is not (H, W, C), no bands, or a band it does not have.
    """

    dtype = np.dtype(np.float32)

    def __init__(self, source: Any, bands: Sequence[int], scale: float = 1.0) -> None:
        shape = tuple(getattr(source, 'shape', ()))
        if len(shape) != 3:
            raise ValueError(f'BandView takes an (H, W, C) image, got shape {shape}')
        bands = [int(b) for b in bands]
        if not bands or not all(0 <= b < shape[2] for b in bands):
            raise ValueError(f'bands must be a non-empty sequence of band indices in '
                             f'[0, {shape[2] - 1}] (the image has {shape[2]} bands), '
                             f'got {bands}')
        self.source = source
        self.bands = bands
        self.scale = float(scale)
        self.shape = (shape[0], shape[1], len(bands))

    def __getitem__(self, rows: slice) -> np.ndarray:
        """Rows ``rows`` (a slice with step 1) of the chosen bands.

        Returns:
            np.ndarray: (rows, W, len(bands)) float32.
        """
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise IndexError(f'a BandView slices by rows only (view[start:stop]), got {rows!r}')
        data = np.asarray(self.source[rows])[..., self.bands]
        return data.astype(np.float32) * np.float32(self.scale)
