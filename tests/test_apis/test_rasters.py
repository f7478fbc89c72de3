"""write_geotiff and RasterImage: a written raster reads back by rows; the retired keyword
``bands`` still writes the same file, with a warning."""
import numpy as np
import pytest

pytest.importorskip('rasterio')

from mmlinear.apis.rasters import RasterImage, write_geotiff  # noqa: E402


def test_written_channels_read_back_by_rows_and_the_retired_keyword_warns(tmp_path):
    data = np.arange(2 * 5 * 3, dtype=np.uint16).reshape(2, 5, 3)
    write_geotiff(str(tmp_path / 'new.tif'), data=data)
    with pytest.warns(FutureWarning, match="'bands' is deprecated .* use 'data'"):
        write_geotiff(str(tmp_path / 'old.tif'), bands=data)
    for name in ('new.tif', 'old.tif'):
        with RasterImage(tmp_path / name) as image:
            assert image.shape == (5, 3, 2)
            np.testing.assert_array_equal(image[1:4], data.transpose(1, 2, 0)[1:4])
