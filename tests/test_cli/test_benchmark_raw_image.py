import numpy as np
import pytest

from mmlinear.cli.benchmark.raw_image import RawImageFile


def test_bands_of_rows_read_back_what_was_written(tmp_path):
    path = str(tmp_path / 'image.f32')
    image = RawImageFile.write_random(path, (2, 3, 11, 5), seed=3, rows_per_write=4)
    whole = np.fromfile(path, dtype=np.float32).reshape(2, 3, 11, 5)
    assert np.array_equal(image[:, :, 4:9], whole[:, :, 4:9])
    assert np.array_equal(image[:, :, 0:11], whole)
    assert whole.std() > 0.5  # standard-normal values, not zeros


def test_the_file_stays_readable_once_unlinked_and_bad_use_is_refused(tmp_path):
    path = tmp_path / 'image.f32'
    values = np.arange(2 * 4 * 3, dtype=np.float32).reshape(1, 2, 4, 3)
    values.tofile(path)
    image = RawImageFile(str(path), (1, 2, 4, 3))
    path.unlink()
    assert np.array_equal(image[:, :, 1:3], values[:, :, 1:3])
    with pytest.raises(IndexError, match=r'image\[:, :, start:stop\]'):
        image[0]
    values.tofile(path)
    with pytest.raises(ValueError, match='holds 96 bytes'):
        RawImageFile(str(path), (1, 2, 5, 3))
