"""Whole-slide images (Aperio .svs, Hamamatsu .ndpi, MIRAX .mrxs, ...; any format OpenSlide
reads) at full resolution, read lazily by rows through openslide-python."""
import os
from types import ModuleType
from typing import Union

import numpy as np

from .file_image import FileImage, import_reader

#: File names of the whole-slide formats OpenSlide reads whose suffix no other reader claims
#: (its generic tiled TIFF, Philips and Ventana files end in .tif / .tiff, which GDAL reads).
SLIDE_SUFFIXES = ('.svs', '.ndpi', '.vms', '.vmu', '.scn', '.mrxs', '.svslide', '.bif', '.czi')
#: OpenSlide's background colour when the slide names none (hex RGB).
DEFAULT_BACKGROUND = 'ffffff'


def _openslide() -> ModuleType:
    return import_reader('openslide', 'whole-slide images', 'openslide-python and its library',
                         'openslide-python openslide-bin')


class SlideImage(FileImage):
    """A whole-slide image at full resolution (OpenSlide's level 0) as an (H, W, 3) uint8 RGB
    array that reads only the rows it is sliced for.

    ``image[start:stop]`` asks OpenSlide for that region alone (it decodes only the tiles
    that hold it), so a slide far larger than memory is never read whole; it is what
    :func:`~mmlinear.apis.segment_large_image` takes as an array. Regions the slide does not
    cover (OpenSlide gives them alpha 0) take the slide's background colour, white by
    default. A slide has no map georeference: ``georeference`` is None.

    Args:
        path (str | PathLike): The slide file (for MIRAX, the .mrxs beside its folder).

    Raises:
        FileNotFoundError: No such file.
        ValueError: A file OpenSlide cannot read (another format, or a damaged file).
    """

    georeference = None
    dtype = np.dtype(np.uint8)

    def __init__(self, path: Union[str, os.PathLike]) -> None:
        openslide = _openslide()
        super().__init__(path, 'whole-slide')
        try:
            self._slide = openslide.OpenSlide(self.path)
        except (openslide.OpenSlideError, OSError) as error:
            # OpenSlideUnsupportedFormatError is an OpenSlideError.
            raise ValueError(f'cannot read {self.path!r} as a whole-slide image: '
                             f'{type(error).__name__}: {error} (formats: '
                             f'{", ".join(SLIDE_SUFFIXES)} and tiled TIFF)') from error
        width, height = self._slide.dimensions
        self.shape = (height, width, 3)
        colour = self._slide.properties.get(openslide.PROPERTY_NAME_BACKGROUND_COLOR,
                                            DEFAULT_BACKGROUND)
        self.background = np.array([int(colour[i:i + 2], 16) for i in (0, 2, 4)], np.float32)

    def __getitem__(self, rows: slice) -> np.ndarray:
        """Rows ``rows`` (a slice with step 1) at full resolution.

        Returns:
            np.ndarray: (rows, W, 3) uint8 RGB.

        Raises:
            ValueError: When OpenSlide cannot give those rows (a damaged file), naming both.
        """
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise IndexError(f'a SlideImage slices by rows only (image[start:stop]), got '
                             f'{rows!r}')
        start, stop, _ = rows.indices(self.shape[0])
        if stop <= start:
            return np.zeros((0, self.shape[1], 3), np.uint8)
        try:
            region = self._slide.read_region((0, start), 0, (self.shape[1], stop - start))
        except _openslide().OpenSlideError as error:
            raise ValueError(f'cannot read rows [{start}, {stop}) of {self.path!r}: {error} '
                             f'(a damaged file)') from error
        rgba = np.asarray(region, np.float32)
        alpha = rgba[..., 3:] / 255
        # OpenSlide's RGB is not premultiplied: composite it over the background.
        rgb = rgba[..., :3] * alpha + self.background * (1 - alpha)
        return np.round(rgb).astype(np.uint8)

    def close(self) -> None:
        """Close the slide."""
        self._slide.close()
