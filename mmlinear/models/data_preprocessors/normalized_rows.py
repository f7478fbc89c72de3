"""An (H, W, C) image as the data preprocessor's (1, C, H, W) input, normalised by rows."""
from typing import Any, Tuple

import numpy as np
import torch
from torch import Tensor, nn


class NormalizedRows:
    """An (H, W, C) or (H, W) image, read by rows as the (1, C, H, W) float tensor an mmseg /
    mmdet data preprocessor would make of it.

    The toolboxes' preprocessors take the packed (C, H, W) image, convert BGR to RGB if
    configured (``channel_conversion``, each by its own rule: :meth:`_converts_channels`),
    cast to float32 and subtract ``mean`` / divide by ``std``; this does the same for the rows
    asked for, so a huge image (a numpy memmap, a raster read by windows) is never one float
    tensor. It slices as
    ``rows[:, :, start:stop]`` and has ``shape`` and ``dtype``, which is what
    :meth:`~mmlinear.models.backbones.base_plain_backbone.BasePlainBackbone.forward_streamed`
    reads.

    Args:
        source (array-like): (H, W, C) or (H, W) image, any numeric dtype, sliced by rows as
            ``source[start:stop]``.
        data_preprocessor (nn.Module): The model's data preprocessor (its ``mean``, ``std``,
            ``channel_conversion`` or ``_channel_conversion`` and ``_enable_normalize``).
    """

    dtype = np.dtype(np.float32)

    def __init__(self, source: Any, data_preprocessor: nn.Module) -> None:
        self.source = source
        self.shape = self.batch_shape(source)
        channels = self.shape[1]
        self.channel_conversion = self._converts_channels(data_preprocessor, channels)
        self.normalize = bool(getattr(data_preprocessor, '_enable_normalize', False))
        if self.normalize:
            mean, std = data_preprocessor.mean, data_preprocessor.std
            if mean.shape[0] not in (1, channels):
                raise ValueError(f'the data preprocessor normalises {mean.shape[0]} channels; '
                                 f'the image has {channels}')
            self.mean, self.std = mean.float().cpu(), std.float().cpu()

    @staticmethod
    def _converts_channels(data_preprocessor: nn.Module, channels: int) -> bool:
        """Whether the preprocessor would reverse the channels of this image, by its own rule.

        mmlinear's segmentation preprocessors (as mmseg 1.2.2's) name the setting
        ``channel_conversion`` and reverse 3-channel images only, leaving others as they are;
        mmengine's (and so mmdet's) name it ``_channel_conversion`` and index channels
        ``[2, 1, 0]`` whatever their number, which would drop the channels past the third of a
        multi-channel image: refused.

        Raises:
            ValueError: An mmengine-style conversion of an image that has not 3 channels.
        """
        if hasattr(data_preprocessor, 'channel_conversion'):
            return bool(data_preprocessor.channel_conversion) and channels == 3
        conversion = bool(getattr(data_preprocessor, '_channel_conversion', False))
        if conversion and channels != 3:
            raise ValueError(f'the data preprocessor converts BGR to RGB by taking channels '
                             f'[2, 1, 0], which needs 3 channels; the image has {channels} '
                             f'(set bgr_to_rgb=False for a model of other channels)')
        return conversion

    @staticmethod
    def batch_shape(source: Any) -> Tuple[int, int, int, int]:
        """(1, C, H, W) of an (H, W, C) or (H, W) image; a ValueError for other shapes."""
        shape = tuple(getattr(source, 'shape', ()))
        if len(shape) not in (2, 3):
            raise ValueError(f'expected an (H, W, C) or (H, W) image, got '
                             f'{shape if shape else type(source).__name__}')
        return 1, shape[2] if len(shape) == 3 else 1, shape[0], shape[1]

    def __getitem__(self, index: Tuple[slice, slice, slice]) -> Tensor:
        """Rows ``index[2]`` of every channel: ``rows[:, :, start:stop]`` only.

        Returns:
            Tensor: (1, C, rows, W) float32.
        """
        if not (isinstance(index, tuple) and len(index) == 3
                and all(isinstance(i, slice) for i in index) and index[0] == slice(None)
                and index[1] == slice(None) and index[2].step in (None, 1)):
            raise IndexError(f'NormalizedRows slices as [:, :, start:stop] only, got {index!r}')
        rows = np.asarray(self.source[index[2]])
        if rows.ndim == 2:
            rows = rows[..., None]
        band = torch.from_numpy(np.ascontiguousarray(rows.transpose(2, 0, 1)))[None]
        if self.channel_conversion:
            band = band[:, [2, 1, 0]]
        band = band.float()
        if self.normalize:
            band = (band - self.mean) / self.std
        return band
