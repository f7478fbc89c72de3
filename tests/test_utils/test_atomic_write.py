"""atomic_output: the final file appears only once its writer has finished."""
import os

import pytest

from mmlinear.utils.atomic_write import atomic_output, partial_path


def test_partial_name_keeps_the_extension():
    assert partial_path('out/class_map.tif') == 'out/class_map.partial.tif'
    assert partial_path('model') == 'model.partial'


def test_renamed_when_the_block_ends(tmp_path):
    path = tmp_path / 'scene.tif'
    path.write_bytes(b'old')
    with atomic_output(str(path)) as partial:
        assert partial == str(tmp_path / 'scene.partial.tif')
        with open(partial, 'wb') as f:
            f.write(b'new')
        assert path.read_bytes() == b'old'  # not replaced before the block ends
    assert path.read_bytes() == b'new'
    assert os.listdir(tmp_path) == ['scene.tif']


def test_a_failed_writer_leaves_the_old_file_and_no_partial(tmp_path):
    path = tmp_path / 'scene.tif'
    path.write_bytes(b'old')
    with pytest.raises(RuntimeError, match='disk full'):
        with atomic_output(str(path)) as partial:
            with open(partial, 'wb') as f:
                f.write(b'ne')
            raise RuntimeError('disk full')
    assert path.read_bytes() == b'old'
    assert os.listdir(tmp_path) == ['scene.tif']
