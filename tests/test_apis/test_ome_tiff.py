"""OmeTiffImage: OME-TIFF channels read lazily by rows through tifffile, and its refusals."""
import os.path as osp
import warnings

import numpy as np
import pytest
import tifffile
import torch
from conftest import REPO_ROOT
from random_demo_models import random_demo_model

from mmlinear.apis.large_image_inputs import open_image
from mmlinear.apis.large_image_segmentation import segment_large_image
from mmlinear.apis.ome_tiff import OmeTiffImage

CONFIG = osp.join(REPO_ROOT, 'configs', 'demo', 'upernet_infvit-demo-linear_shapes-ade.py')


def channels(count=4, height=300, width=200, dtype=np.uint16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, np.iinfo(dtype).max, (count, height, width), dtype=dtype)


def write_ome(path, data, **options):
    tifffile.imwrite(path, data, ome=True, metadata={'axes': 'CYX'}, **options)
    return str(path)


@pytest.mark.parametrize(
    'options', [dict(tile=(64, 64), compression='zlib'),
                dict(rowsperstrip=7),
                dict(tile=(32, 48))],
    ids=['deflate tiles', 'strips', 'uneven tiles'])
def test_four_uint16_channels_read_by_rows(tmp_path, options):
    data = channels()
    path = write_ome(tmp_path / 'cells.ome.tif', data, **options)
    image = open_image(path)
    assert isinstance(image, OmeTiffImage)
    with image:
        assert image.shape == (300, 200, 4) and image.dtype == np.uint16
        assert image.georeference is None
        for start, stop in [(0, 300), (10, 77), (64, 128), (299, 400), (5, 5)]:
            np.testing.assert_array_equal(image[start:stop], data[:, start:stop].transpose(1, 2, 0))


def test_only_the_tiles_of_the_rows_are_read(tmp_path, monkeypatch):
    path = write_ome(tmp_path / 'cells.ome.tiff', channels(width=300), tile=(64, 64))
    with OmeTiffImage(path) as image:
        reads = []
        original = tifffile.FileHandle.read

        def counted(handle, size=-1):
            reads.append(size)
            return original(handle, size)

        monkeypatch.setattr(tifffile.FileHandle, 'read', counted)
        image[64:128]
    # One row of tiles (5 across 300 columns) in each of the 4 channels' pages.
    assert len(reads) == 4 * 5


def test_interleaved_and_separate_rgb_pages(tmp_path):
    rgb = channels(3, 100, 90, np.uint8).transpose(1, 2, 0)
    tifffile.imwrite(tmp_path / 'a.ome.tif', rgb, ome=True, photometric='rgb', tile=(32, 32))
    tifffile.imwrite(
        tmp_path / 'b.ome.tif',
        np.ascontiguousarray(rgb.transpose(2, 0, 1)),
        ome=True,
        photometric='rgb',
        planarconfig='separate',
        rowsperstrip=16)
    for name in ('a', 'b'):
        with OmeTiffImage(tmp_path / f'{name}.ome.tif') as image:
            assert image.shape == (100, 90, 3)
            np.testing.assert_array_equal(image[3:70], rgb[3:70])


def test_segment_large_image_reads_an_ome_tiff_path_by_rows(tmp_path):
    model = random_demo_model(CONFIG)
    data = channels(3, 96, 80, np.uint8)
    path = write_ome(tmp_path / 'rgb.ome.tif', data, tile=(32, 32))
    from_file = segment_large_image(model, path, band_rows=3)
    from_array = segment_large_image(model, np.ascontiguousarray(data.transpose(1, 2, 0)))
    torch.testing.assert_close(from_file, from_array, rtol=0, atol=0)


def test_a_truncated_file_names_the_rows_it_cannot_read(tmp_path):
    path = write_ome(tmp_path / 'cells.ome.tif', channels(), tile=(64, 64))
    with open(path, 'rb') as f:
        content = f.read()
    # The OME-XML and the first IFD are at the start; the last channel's tiles are lost.
    with open(path, 'wb') as f:
        f.write(content[:len(content) * 3 // 4])
    with pytest.raises(ValueError, match=r'truncated'):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # tifffile's own messages about the file
            with OmeTiffImage(path) as image:
                image[0:300]


def test_files_that_are_not_ome_tiff_are_refused(tmp_path):
    text = tmp_path / 'notes.ome.tif'
    text.write_text('not an image')
    with pytest.raises(ValueError, match=r"cannot read '.*notes.ome.tif' as an OME-TIFF"):
        open_image(text)
    plain = tmp_path / 'plain.ome.tif'
    tifffile.imwrite(plain, channels(1)[0], ome=False)
    with pytest.raises(ValueError, match='a TIFF without OME metadata'):
        OmeTiffImage(plain)
    series = tmp_path / 'series.ome.tif'
    tifffile.imwrite(
        series, channels(6).reshape(3, 2, 300, 200), ome=True, metadata={'axes': 'TCYX'})
    with pytest.raises(ValueError, match=r"holds \{'T': 3\} planes besides its channels"):
        OmeTiffImage(series)
    with pytest.raises(FileNotFoundError, match='no image file'):
        open_image(tmp_path / 'missing.ome.tif')
