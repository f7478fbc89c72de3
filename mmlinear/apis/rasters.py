"""Large raster files in and out: GeoTIFF / BigTIFF (any format GDAL reads) read lazily by
windows of rows, with N channels of 8-bit, 16-bit or float data and their georeference, and tiled
GeoTIFF outputs that keep it. Needs ``rasterio`` (its wheels ship GDAL)."""
import os
from types import ModuleType
from typing import Any, NamedTuple, Optional, Union

import numpy as np

from mmlinear.utils.deprecation import renamed_arguments
from .file_image import FileImage, import_reader

#: Rows per block when a raster is written (a multiple of the tile height).
WRITE_BLOCK_ROWS = 1024
TILE = 512


class Georeference(NamedTuple):
    """Where a raster lies: its coordinate reference system and its affine pixel-to-map
    transform (rasterio's ``CRS`` and ``Affine``)."""
    crs: Any
    transform: Any


def _rasterio() -> ModuleType:
    return import_reader('rasterio', 'large raster files', 'rasterio', 'rasterio')


class RasterImage(FileImage):
    """A raster file as an (H, W, C) array that reads only the rows it is sliced for.

    ``image[start:stop]`` reads a window of those rows of every channel (a tiled or striped
    GeoTIFF / BigTIFF only decodes the blocks it touches), so an image larger than memory is
    never read whole; it is what :func:`~mmlinear.apis.segment_large_image` takes as an array.

    Args:
        path (str | PathLike): The raster file.

    Raises:
        FileNotFoundError: No such file.
        ValueError: A file GDAL cannot open, or channels of different dtypes.
    """

    def __init__(self, path: Union[str, os.PathLike]) -> None:
        rasterio = _rasterio()
        super().__init__(path, 'raster')
        try:
            self._dataset = rasterio.open(self.path)
        except rasterio.errors.RasterioIOError as error:
            raise ValueError(f'cannot read {self.path!r} as a raster: {error}') from error
        dtypes = set(self._dataset.dtypes)
        if len(dtypes) != 1:
            raise ValueError(f'{self.path!r} has channels of different dtypes '
                             f'{sorted(dtypes)}; one dtype for all channels is supported')
        self.dtype = np.dtype(dtypes.pop())
        self.shape = (self._dataset.height, self._dataset.width, self._dataset.count)

    @property
    def georeference(self) -> Optional[Georeference]:
        """Georeference | None: The raster's CRS and transform; None when it has no CRS."""
        if self._dataset.crs is None:
            return None
        return Georeference(self._dataset.crs, self._dataset.transform)

    def __getitem__(self, rows: slice) -> np.ndarray:
        """Rows ``rows`` (a slice with step 1) of every channel.

        Returns:
            np.ndarray: (rows, W, C) of the raster's dtype.

        Raises:
            ValueError: When the file cannot give those rows (a truncated file), naming both.
        """
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise IndexError(f'a RasterImage slices by rows only (image[start:stop]), got '
                             f'{rows!r}')
        rasterio = _rasterio()
        start, stop, _ = rows.indices(self.shape[0])
        window = rasterio.windows.Window(0, start, self.shape[1], max(stop - start, 0))
        try:
            data = self._dataset.read(window=window)
        except rasterio.errors.RasterioIOError as error:
            raise ValueError(f'cannot read rows [{start}, {stop}) of {self.path!r}: {error} '
                             f'(a truncated or damaged file)') from error
        return data.transpose(1, 2, 0)

    def close(self) -> None:
        """Close the file."""
        self._dataset.close()


@renamed_arguments(bands='data')
def write_geotiff(path: str,
                  data: Any,
                  georeference: Optional[Georeference] = None,
                  nodata: Optional[float] = None) -> None:
    """Write (C, H, W) or (H, W) data as a tiled, deflate-compressed GeoTIFF (BigTIFF where
    it needs to be), a block of rows at a time.

    Args:
        path (str): The file to write (replaced if it exists).
        data (array-like): (C, H, W) or (H, W) values, a numpy array or a CPU tensor (a
            memory-mapped one is read a block at a time; deprecated spelling ``bands``).
        georeference (Georeference, optional): The CRS and transform to keep. Defaults to
            None (a raster without one).
        nodata (float, optional): The value that marks no data.
    """
    rasterio = _rasterio()
    data = data.numpy() if hasattr(data, 'numpy') else np.asarray(data)
    if data.ndim == 2:
        data = data[None]
    count, height, width = data.shape
    profile = dict(
        driver='GTiff',
        height=height,
        width=width,
        count=count,
        dtype=data.dtype.name,
        tiled=True,
        blockxsize=TILE,
        blockysize=TILE,
        compress='deflate',
        BIGTIFF='IF_SAFER',
        nodata=nodata)
    if georeference is not None:
        profile.update(crs=georeference.crs, transform=georeference.transform)
    with rasterio.open(path, 'w', **profile) as dataset:
        for start in range(0, height, WRITE_BLOCK_ROWS):
            stop = min(start + WRITE_BLOCK_ROWS, height)
            window = rasterio.windows.Window(0, start, width, stop - start)
            dataset.write(np.ascontiguousarray(data[:, start:stop]), window=window)
