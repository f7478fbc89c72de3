"""Some channels of a large image, in another order and scaled, read by rows like the image."""
from typing import Any, Sequence

import numpy as np

from mmlinear.utils.deprecation import renamed_arguments


class ChannelView:
    """Channels ``channels`` of an (H, W, C) image, in that order, times ``scale``, as an
    (H, W, len(channels)) float32 array-like read by rows.

    It feeds a model trained on other images the channels it knows without reading the image
    whole: e.g. an RGB model trained on mmcv-read (BGR, 8-bit) images sees a 4-channel 16-bit
    raster (R, G, B, near-infrared) as ``ChannelView(raster, (2, 1, 0), 255 / 65535)``.
    ``view[start:stop]`` reads those rows of the source (a
    :class:`~mmlinear.apis.rasters.RasterImage` decodes only the blocks they touch).

    Args:
        source (array-like): An (H, W, C) image sliced by rows as ``source[start:stop]``.
        channels (Sequence[int]): The source's channels to keep, in the order to give them
            (deprecated spelling ``bands``).
        scale (float): Each value is multiplied by it. Defaults to 1.

    Raises:
        ValueError: A source that is not (H, W, C), no channels, or a channel it does not
            have.
    """

    dtype = np.dtype(np.float32)

    @renamed_arguments(bands='channels')
    def __init__(self, source: Any, channels: Sequence[int], scale: float = 1.0) -> None:
        shape = tuple(getattr(source, 'shape', ()))
        if len(shape) != 3:
            raise ValueError(f'ChannelView takes an (H, W, C) image, got shape {shape}')
        channels = [int(c) for c in channels]
        if not channels or not all(0 <= c < shape[2] for c in channels):
            raise ValueError(f'channels must be a non-empty sequence of channel indices in '
                             f'[0, {shape[2] - 1}] (the image has {shape[2]} channels), '
                             f'got {channels}')
        self.source = source
        self.channels = channels
        self.scale = float(scale)
        self.shape = (shape[0], shape[1], len(channels))

    def __getitem__(self, rows: slice) -> np.ndarray:
        """Rows ``rows`` (a slice with step 1) of the chosen channels.

        Returns:
            np.ndarray: (rows, W, len(channels)) float32.
        """
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise IndexError(f'a ChannelView slices by rows only (view[start:stop]), got '
                             f'{rows!r}')
        data = np.asarray(self.source[rows])[..., self.channels]
        return data.astype(np.float32) * np.float32(self.scale)
