"""The many-image benchmark's folder: each raster as its spec says, the bad ones bad in the way
a run must record (unreadable, 2 channels), the good ones readable by the tool's readers."""
import os

import numpy as np
import pytest

from mmlinear.apis import open_image
from mmlinear.apis.rasters import RasterImage
from mmlinear.cli.benchmark.raster_folder import (DEFAULT_BAD, DEFAULT_GOOD, folder_specs,
                                                  scene_pixels, write_raster_folder)


def test_default_folder_has_twenty_rasters_from_256_to_8192_that_two_processes_can_share():
    specs = folder_specs()
    assert len(specs) == 20
    good = [s for s in specs if s.fault is None]
    assert min(min(s.height, s.width) for s in good) == 256
    assert max(max(s.height, s.width) for s in good) == 8192
    assert {s.name.split('.', 1)[1] for s in good} == {'tif', 'ome.tif'}
    assert sorted(s.fault for s in specs if s.fault) == ['corrupt', 'two_channels']
    # sharing by pixels can balance two processes: the largest raster under half the total
    assert max(s.pixels for s in good) < 0.5 * sum(s.pixels for s in good)
    assert len({s.name for s in specs}) == len(specs)


def test_written_rasters_are_what_their_specs_say(tmp_path):
    good = [(70, 90, 'tif'), (64, 100, 'ome.tif')]
    specs = folder_specs(good, [(64, 64, 'corrupt'), (64, 80, 'two_channels')])
    paths = write_raster_folder(str(tmp_path), specs, seed=3)
    assert [os.path.basename(p) for p in paths] == [s.name for s in specs]
    geotiff, ome = open_image(paths[0]), open_image(paths[1])
    assert geotiff.shape == (70, 90, 3) and isinstance(geotiff, RasterImage)
    assert geotiff.georeference is not None
    assert ome.shape == (64, 100, 3)
    np.testing.assert_array_equal(
        np.asarray(geotiff[0:70]).transpose(2, 0, 1), scene_pixels(70, 90, seed=3))
    with pytest.raises(Exception):
        np.asarray(open_image(paths[2])[0:64])
    assert open_image(paths[3]).shape == (64, 80, 2)
    # a second call keeps the files (same bytes, not rewritten)
    before = {p: os.stat(p).st_mtime_ns for p in paths}
    write_raster_folder(str(tmp_path), specs, seed=3)
    assert {p: os.stat(p).st_mtime_ns for p in paths} == before


@pytest.mark.parametrize('good, bad, message', [
    ([(64, 64, 'png')], [], "'tif' or 'ome.tif'"),
    ([], [(64, 64, 'truncated')], 'unknown fault'),
    ([(0, 64, 'tif')], [], 'positive'),
])
def test_bad_specs_are_refused_naming_the_allowed_values(good, bad, message):
    with pytest.raises(ValueError, match=message):
        folder_specs(good, bad)


def test_default_lists_are_the_documented_ones():
    assert len(DEFAULT_GOOD) == 18 and len(DEFAULT_BAD) == 2
