"""What every whole-image API does with its input before streaming it: the image a path
names, opened by the reader its suffix asks for, and the rows a streamed model reads, after
the checks of the test pipeline's resizes, the data preprocessor's padding and the channel count.

Neither mmseg nor mmdet is needed here, so segmentation and detection each import only their
own toolbox.
"""
import os
import os.path as osp
import warnings
from typing import Any, List, Optional, Tuple, Union

import numpy as np
from torch import nn

from mmlinear.models.data_preprocessors import NormalizedRows
from .ome_tiff import OME_TIFF_SUFFIXES, OmeTiffImage
from .whole_slide import SLIDE_SUFFIXES, SlideImage

#: Files read lazily by windows through rasterio (GDAL) rather than whole through mmcv.
RASTER_SUFFIXES = ('.tif', '.tiff', '.vrt', '.img', '.jp2')
#: Transforms of a test pipeline that would change the image's size.
RESIZING_TRANSFORMS = ('Resize', 'RandomResize', 'RandomChoiceResize', 'ResizeToMultiple',
                       'ResizeShortestEdge')


def open_image(source: Union[str, os.PathLike, Any]) -> Any:
    """The (H, W, C) image a path names, or ``source`` itself when it is an array.

    An OME-TIFF (``OME_TIFF_SUFFIXES``: ``.ome.tif`` ...) is opened as an
    :class:`~mmlinear.apis.ome_tiff.OmeTiffImage` (its channels, read by rows through
    tifffile), a whole-slide image (``SLIDE_SUFFIXES``: ``.svs``, ``.ndpi`` ...) as a
    :class:`~mmlinear.apis.whole_slide.SlideImage` (RGB at full resolution, read by rows
    through OpenSlide), a GeoTIFF / BigTIFF (any other of ``RASTER_SUFFIXES``) as a
    :class:`~mmlinear.apis.rasters.RasterImage` (N channels, read by windows of rows, in the
    file's channel order), a ``.npy`` file is memory-mapped (read by rows as needed); any other
    file is read by mmcv as mmseg's ``LoadImageFromFile`` reads it (BGR, whole).

    Raises:
        FileNotFoundError: No such file.
        ValueError: A file its reader cannot read, naming it.
    """
    if not isinstance(source, (str, os.PathLike)):
        return source
    path = os.fspath(source)
    if not osp.isfile(path):
        raise FileNotFoundError(f'no image file {path!r}')
    if path.lower().endswith(OME_TIFF_SUFFIXES):
        return OmeTiffImage(path)
    if path.lower().endswith(SLIDE_SUFFIXES):
        return SlideImage(path)
    if path.lower().endswith(RASTER_SUFFIXES):
        from .rasters import RasterImage
        return RasterImage(path)
    if path.endswith('.npy'):
        return np.load(path, mmap_mode='r')
    import mmcv
    image = mmcv.imread(path)
    if image is None:
        raise ValueError(f'cannot read {path!r} as an image (mmcv.imread returned nothing): '
                         f'the file is truncated or not an image')
    return image


def skipped_resizes(model: nn.Module) -> List[str]:
    """The resizing transforms of the model config's test pipeline (which a whole-image run at
    the image's own resolution skips)."""
    cfg = getattr(model, 'cfg', None)
    pipeline = cfg.get('test_pipeline', []) if cfg is not None else []
    return [
        t['type'] for t in pipeline if isinstance(t, dict) and t.get('type') in RESIZING_TRANSFORMS
    ]


def whole_image_rows(model: nn.Module, image: Any, in_channels: int, caller: str,
                     skipped_padding: Optional[str]) -> Tuple[NormalizedRows, int, int]:
    """The image as the rows a streamed model reads, normalised by the model's data
    preprocessor, after the checks every whole-image API makes: a warning for each resize of
    the test pipeline and for the padding it skips, and an error for a channel count the model
    was not built for.

    Args:
        model (nn.Module): The mmseg / mmdet model (its ``cfg`` and ``data_preprocessor``).
        image (Any): (H, W, C) or (H, W) array-like, read by rows.
        in_channels (int): The channels the model takes.
        caller (str): The API and what it does, opening the warnings
            ('segment_large_image segments').
        skipped_padding (str, optional): What the caller says of the preprocessor's padding
            it skips ("does not pad: ... is skipped"), or None when there is none.

    Returns:
        tuple[NormalizedRows, int, int]: The rows, and the image's height and width.
    """
    for name in skipped_resizes(model):
        warnings.warn(f'{caller} at the image\'s own resolution: the test pipeline\'s {name} '
                      f'is skipped')
    if skipped_padding is not None:
        warnings.warn(skipped_padding)
    _, channels, height, width = NormalizedRows.batch_shape(image)
    if channels != in_channels:
        raise ValueError(f'the model takes images of {in_channels} channels, the image has '
                         f'{channels}')
    return NormalizedRows(image, model.data_preprocessor), height, width
