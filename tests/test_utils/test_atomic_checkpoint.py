"""write_file_atomic and the atomic mmengine checkpoint writer: the target holds its old or its
new content, never a part, and a failed write says so and leaves nothing behind."""
import errno
import glob
import os
import os.path as osp
import stat

import mmengine.runner
import pytest
import torch

from mmlinear.utils import atomic_checkpoint, write_file_atomic


def temporaries(folder):
    return glob.glob(osp.join(folder, '.*.tmp'))


def test_writes_the_whole_content_with_the_permissions_open_gives(tmp_path):
    path = str(tmp_path / 'sub' / 'file.bin')
    write_file_atomic(path, b'old')
    write_file_atomic(path, b'new content')
    with open(path, 'rb') as f:
        assert f.read() == b'new content'
    plain = str(tmp_path / 'plain.bin')
    open(plain, 'wb').close()
    assert stat.S_IMODE(os.stat(path).st_mode) == stat.S_IMODE(os.stat(plain).st_mode)
    assert not temporaries(osp.dirname(path))


@pytest.mark.parametrize('failure', ['enospc', 'interrupt'])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(failure, tmp_path, monkeypatch):
    path = str(tmp_path / 'epoch_2.pth')
    write_file_atomic(path, b'whole old checkpoint')

    def fail_half_way(f, data):
        f.write(data[:len(data) // 2])
        if failure == 'enospc':
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic_checkpoint, '_write_all', fail_half_way)
    if failure == 'enospc':
        with pytest.raises(OSError) as error:
            write_file_atomic(path, b'new content that does not fit')
        assert error.value.errno == errno.ENOSPC
        assert str(error.value) == (
            f'[Errno 28] cannot write {path}: No space left on device (the disk is full: free '
            f'space, then resume); {path} and every earlier checkpoint and last_checkpoint were '
            'left as they were')
    else:
        with pytest.raises(KeyboardInterrupt):
            write_file_atomic(path, b'new content')
    with open(path, 'rb') as f:
        assert f.read() == b'whole old checkpoint'
    assert not temporaries(str(tmp_path))


def test_a_temporary_left_by_a_killed_write_is_removed_by_the_next_write(tmp_path):
    path = str(tmp_path / 'epoch_3.pth')
    left = str(tmp_path / '.epoch_3.pth.abc123.tmp')
    other = str(tmp_path / '.epoch_4.pth.abc123.tmp')  # another file's: not touched
    for name in (left, other):
        with open(name, 'wb') as f:
            f.write(b'torn')
    write_file_atomic(path, b'whole')
    assert not osp.exists(left) and osp.exists(other)


def test_mmengine_saves_local_checkpoints_atomically(tmp_path, monkeypatch):
    writes = []
    monkeypatch.setattr(atomic_checkpoint, 'write_file_atomic',
                        lambda path, data: writes.append(path) or open(path, 'wb').write(data))
    path = str(tmp_path / 'epoch_1.pth')
    # The name the Runner calls, and the public one.
    for save in (mmengine.runner.runner.save_checkpoint, mmengine.runner.save_checkpoint):
        save(dict(meta=dict(iter=1), state_dict=dict(w=torch.arange(3))), path)
    assert writes == [path, path]
    loaded = torch.load(path, weights_only=True)
    assert torch.equal(loaded['state_dict']['w'], torch.arange(3))
