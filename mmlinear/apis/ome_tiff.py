"""OME-TIFF files (microscopy: N channels of 8-bit, 16-bit or float data, one page per channel
or interleaved) read lazily by rows through tifffile, decoding only the strips or tiles a
window of rows touches."""
import math
import os
from types import ModuleType
from typing import Any, List, Union

import numpy as np

from .file_image import FileImage, import_reader

#: File names the OME-TIFF specification gives its files.
OME_TIFF_SUFFIXES = ('.ome.tif', '.ome.tiff', '.ome.tf2', '.ome.tf8', '.ome.btf')
#: Axes of an OME-TIFF series that become the image's rows, columns and channels; every other
#: axis (time, depth) must have one plane.
IMAGE_AXES = 'YXCS'


def _tifffile() -> ModuleType:
    return import_reader('tifffile', 'OME-TIFF files', 'tifffile', 'tifffile')


class OmeTiffImage(FileImage):
    """An OME-TIFF file as an (H, W, C) array that reads only the rows it is sliced for.

    The first image (series) of the file at full resolution is read: its channels are the
    pages of its channel axis (``C``), each with its samples (``S``; 1 in most microscopy
    files, 3 for an interleaved RGB page), in the file's order. ``image[start:stop]`` decodes
    only the strips or tiles of each page that hold those rows, so an image larger than
    memory is never read whole; it is what :func:`~mmlinear.apis.segment_large_image` takes as
    an array. OME-TIFF has no map georeference: ``georeference`` is None.

    Args:
        path (str | PathLike): The OME-TIFF file.

    Raises:
        FileNotFoundError: No such file.
        ValueError: A file tifffile cannot read as a TIFF, one without OME metadata, a series
            with more than one time point or depth plane, or pages that differ in size or
            dtype.
    """

    georeference = None

    def __init__(self, path: Union[str, os.PathLike]) -> None:
        tifffile = _tifffile()
        super().__init__(path, 'OME-TIFF')
        try:
            self._file = tifffile.TiffFile(self.path)
        except (tifffile.TiffFileError, ValueError, OSError) as error:
            raise ValueError(f'cannot read {self.path!r} as an OME-TIFF: {error} (a truncated '
                             f'file or another format)') from error
        try:
            self._pages = self._channel_pages()
        except Exception:
            self._file.close()
            raise
        keyframe = self._pages[0].keyframe
        self.dtype = np.dtype(keyframe.dtype)
        self.shape = (keyframe.imagelength, keyframe.imagewidth,
                      sum(page.keyframe.samplesperpixel for page in self._pages))

    def _channel_pages(self) -> List[Any]:
        """The pages of the first series, one per channel (plane of the ``C`` axis)."""
        if not self._file.is_ome or not self._file.series:
            raise ValueError(f'{self.path!r} is a TIFF without OME metadata (an OME-TIFF has '
                             f'OME-XML in its first ImageDescription); read it as a GeoTIFF')
        series = self._file.series[0]
        extra = {
            axis: size
            for axis, size in zip(series.axes, series.shape) if axis not in IMAGE_AXES and size != 1
        }
        if extra:
            raise ValueError(f'{self.path!r} holds {extra} planes besides its channels (axes '
                             f'{series.axes!r}); one image of axes {IMAGE_AXES} is supported')
        pages = list(series.pages)
        if not pages or any(page is None for page in pages):
            raise ValueError(f'{self.path!r}: its OME metadata names pages the file does not '
                             f'have (a truncated file)')
        shapes = {(p.keyframe.imagelength, p.keyframe.imagewidth, str(p.keyframe.dtype))
                  for p in pages}
        if len(shapes) != 1:
            raise ValueError(f'{self.path!r} has channels of different sizes or dtypes '
                             f'{sorted(shapes)}; one size and dtype is supported')
        return pages

    def _read_page_rows(self, page: Any, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) of one page: (rows, W, samples), decoding only its segments
        (tiles or strips) that hold them."""
        key = page.keyframe
        height, width, samples = key.imagelength, key.imagewidth, key.samplesperpixel
        if key.is_tiled:
            segment_rows, across = key.tilelength, math.ceil(width / key.tilewidth)
        else:
            segment_rows, across = min(key.rowsperstrip or height, height), 1
        down = math.ceil(height / segment_rows)
        planes = samples if key.planarconfig == 2 else 1  # 2: PLANARCONFIG.SEPARATE
        out = np.zeros((stop - start, width, samples), self.dtype)
        handle = self._file.filehandle
        for plane in range(planes):
            for row in range(start // segment_rows, math.ceil(stop / segment_rows)):
                for column in range(across):
                    index = (plane * down + row) * across + column
                    offset, count = page.dataoffsets[index], page.databytecounts[index]
                    if count == 0:  # an empty segment: no data written, zeros
                        continue
                    handle.seek(offset)
                    data = handle.read(count)
                    if len(data) != count:
                        raise ValueError(f'{self.path!r} ends before the data of rows '
                                         f'[{start}, {stop}) (a truncated file)')
                    segment, position, shape = key.decode(data, index, jpegtables=key.jpegtables)
                    segment = np.asarray(segment).reshape(shape)[0]  # (rows, columns, samples)
                    top, left = position[2], position[3]
                    first, last = max(top, start), min(top + shape[1], stop, height)
                    right = min(left + shape[2], width)
                    channels = slice(position[0], position[0] + shape[3])
                    out[first - start:last - start, left:right, channels] = \
                        segment[first - top:last - top, :right - left]
        return out

    def __getitem__(self, rows: slice) -> np.ndarray:
        """Rows ``rows`` (a slice with step 1) of every channel.

        Returns:
            np.ndarray: (rows, W, C) of the file's dtype.

        Raises:
            ValueError: When the file cannot give those rows (a truncated or damaged file),
                naming both.
        """
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise IndexError(f'an OmeTiffImage slices by rows only (image[start:stop]), got '
                             f'{rows!r}')
        start, stop, _ = rows.indices(self.shape[0])
        stop = max(stop, start)
        try:
            return np.concatenate([self._read_page_rows(page, start, stop) for page in self._pages],
                                  axis=2)
        except (ValueError, _tifffile().TiffFileError) as error:
            raise ValueError(f'cannot read rows [{start}, {stop}) of {self.path!r}: {error}') \
                from error

    def close(self) -> None:
        """Close the file."""
        self._file.close()
