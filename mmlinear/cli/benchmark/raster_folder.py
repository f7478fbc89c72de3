"""A folder of generated rasters of mixed sizes, formats and faults: the input of the
many-image benchmark (``tools/analysis_tools/benchmark_many_images.py``).

Each good raster is a continuous shapes scene (:class:`~mmlinear.utils.large_shape_scenes.
ContinuousScene`, the demo's shapes at their training scale) cut to its size, 3 channels of
uint8: a tiled GeoTIFF with a georeference (WGS 84 / UTM 33N, 0.5 m), or an OME-TIFF without
one. Two rasters are bad on purpose: a GeoTIFF cut short after its header (``'corrupt'``) and
a GeoTIFF of 2 channels (``'two_channels'``), which a run must record as failed and go past.
"""
import os
import os.path as osp
import tempfile
from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from mmlinear.utils.large_shape_scenes import ContinuousScene

#: The faults a raster may have on purpose.
FAULTS = ('corrupt', 'two_channels')


class RasterSpec(NamedTuple):
    """One raster of the folder.

    Attributes:
        name (str): Its file name (``.tif`` for a GeoTIFF, ``.ome.tif`` for an OME-TIFF).
        height (int): Rows.
        width (int): Columns.
        fault (str, optional): None for a good raster, else one of :data:`FAULTS`.
    """
    name: str
    height: int
    width: int
    fault: Optional[str] = None

    @property
    def pixels(self) -> int:
        return self.height * self.width


#: (height, width, format) of the good rasters of the default folder, smallest first: 256 x 256
#: to 8192 x 8192, square and not, five OME-TIFFs. 157 megapixels, so that sharing them by
#: pixels between two processes can balance (the largest is 43 % of the total).
DEFAULT_GOOD = [(256, 256, 'tif'), (256, 512, 'ome.tif'), (300, 257, 'tif'), (512, 384, 'tif'),
                (512, 512, 'ome.tif'), (640, 480, 'tif'), (1024, 768, 'ome.tif'),
                (700, 1300, 'tif'), (1024, 1024, 'tif'), (2048, 1024, 'tif'), (1536, 1536, 'tif'),
                (2048, 2048, 'ome.tif'), (3000, 2000, 'tif'), (4096, 3072, 'tif'),
                (4096, 4096, 'tif'), (4096, 4096, 'ome.tif'), (6144, 4096, 'tif'),
                (8192, 8192, 'tif')]
#: The bad rasters of the default folder: (height, width, fault).
DEFAULT_BAD = [(1024, 1024, 'corrupt'), (512, 512, 'two_channels')]
#: The georeference of the GeoTIFFs: EPSG code, and (x, y) of the top-left corner in metres.
CRS = 'EPSG:32633'
CORNER = (500000.0, 5000000.0)
PIXEL_METRES = 0.5


def folder_specs(good: Sequence[Tuple[int, int, str]] = DEFAULT_GOOD,
                 bad: Sequence[Tuple[int, int, str]] = DEFAULT_BAD) -> List[RasterSpec]:
    """The rasters of a folder, named so that their order is the listing's.

    Args:
        good (Sequence[tuple[int, int, str]]): (height, width, 'tif' or 'ome.tif') each.
        bad (Sequence[tuple[int, int, str]]): (height, width, fault) each, a fault of
            :data:`FAULTS`.

    Returns:
        list[RasterSpec]: The good rasters, then the bad ones.
    """
    specs = []
    for index, (height, width, kind) in enumerate(good):
        if kind not in ('tif', 'ome.tif'):
            raise ValueError(f"a good raster's format is 'tif' or 'ome.tif', got {kind!r}")
        specs.append(RasterSpec(f'{index:02d}_{height}x{width}.{kind}', height, width))
    for index, (height, width, fault) in enumerate(bad, start=len(specs)):
        if fault not in FAULTS:
            raise ValueError(f'unknown fault {fault!r}; allowed: {", ".join(FAULTS)}')
        specs.append(RasterSpec(f'{index:02d}_{height}x{width}_{fault}.tif', height, width, fault))
    for spec in specs:
        if min(spec.height, spec.width) < 1:
            raise ValueError(f'{spec.name}: sizes must be positive')
    return specs


def scene_pixels(height: int, width: int, seed: int) -> np.ndarray:
    """A continuous shapes scene of (height, width), (3, H, W) uint8 (its label map unused)."""
    scene = ContinuousScene(max(height, width), seed)
    pixels = np.empty((3, height, width), np.uint8)
    for index in range(scene.num_bands):
        band = scene.band(index)
        if band.top >= height:
            break
        rows = min(band.image.shape[0], height - band.top)
        pixels[:, band.top:band.top + rows] = band.image[:rows, :width].transpose(2, 0, 1)
    return pixels


def write_raster(path: str, spec: RasterSpec, seed: int) -> None:
    """Write one raster of the folder (a good one, or one with its fault)."""
    from rasterio.transform import from_origin

    from mmlinear.apis.rasters import Georeference, write_geotiff
    pixels = scene_pixels(spec.height, spec.width, seed)
    if spec.name.endswith('.ome.tif'):
        import tifffile
        tifffile.imwrite(path, pixels, ome=True, metadata={'axes': 'CYX'})
        return
    georeference = Georeference(CRS, from_origin(*CORNER, PIXEL_METRES, PIXEL_METRES))
    if spec.fault == 'two_channels':
        pixels = pixels[:2]
    if spec.fault != 'corrupt':
        write_geotiff(path, pixels, georeference)
        return
    with tempfile.TemporaryDirectory() as scratch:
        whole = osp.join(scratch, 'whole.tif')
        write_geotiff(whole, pixels, georeference)
        with open(whole, 'rb') as f:
            head = f.read(max(200, os.path.getsize(whole) // 3))
    with open(path, 'wb') as f:
        f.write(head)


def write_raster_folder(folder: str, specs: Sequence[RasterSpec], seed: int = 0) -> List[str]:
    """Write the rasters into ``folder`` (created), keeping those already there.

    Args:
        folder (str): The folder.
        specs (Sequence[RasterSpec]): The rasters, from :func:`folder_specs`.
        seed (int): Seed of the first raster's scene; raster i draws seed + i.

    Returns:
        list[str]: The rasters' paths, in the order of ``specs``.
    """
    os.makedirs(folder, exist_ok=True)
    paths = []
    for index, spec in enumerate(specs):
        path = osp.join(folder, spec.name)
        if not osp.exists(path):
            partial = osp.join(folder, f'.{spec.name}.partial')
            write_raster(partial, spec, seed + index)
            os.replace(partial, path)
        paths.append(path)
    return paths
