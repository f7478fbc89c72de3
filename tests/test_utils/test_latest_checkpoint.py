"""find_latest_valid_checkpoint: the marker's checkpoint if it can be read, else the newest
one that can, each skipped file reported with its reason."""
import os
import os.path as osp

import mmengine.runner
import pytest
import torch

from mmlinear.utils import checkpoint_problem, find_latest_valid_checkpoint


def write(work_dir, name, iteration, mtime):
    path = osp.join(work_dir, name)
    torch.save(dict(meta=dict(iter=iteration), state_dict=dict(w=torch.ones(64))), path)
    os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def run_dir(tmp_path):
    work_dir = str(tmp_path)
    paths = [
        write(work_dir, name, i, 1000 + i)
        for i, name in enumerate(['epoch_1.pth', 'epoch_2.pth', 'iter_25.pth'], start=1)
    ]
    with open(osp.join(work_dir, 'last_checkpoint'), 'w') as f:
        f.write(paths[1])
    return work_dir, paths


def test_the_marker_wins_when_its_checkpoint_is_whole(run_dir, mmengine_log):
    work_dir, (_, epoch_2, _) = run_dir
    assert find_latest_valid_checkpoint(work_dir) == epoch_2
    assert not any('skipping' in m for m in mmengine_log)
    # mmengine's own name resolves to it too (the Runner's auto-resume calls that one).
    assert mmengine.runner.runner.find_latest_checkpoint is find_latest_valid_checkpoint


def test_a_truncated_checkpoint_is_skipped_for_the_newest_readable_one(run_dir, mmengine_log):
    work_dir, (epoch_1, epoch_2, iter_25) = run_dir
    with open(epoch_2, 'r+b') as f:
        f.truncate(osp.getsize(epoch_2) - 100)
    assert checkpoint_problem(epoch_2).startswith('it cannot be read')
    assert find_latest_valid_checkpoint(work_dir) == iter_25
    assert any(
        m.startswith(f'skipping checkpoint {epoch_2}: it cannot be read')
        for m in mmengine_log), mmengine_log
    # Then the next newest, when that one is damaged too (here: not a torch file at all).
    with open(iter_25, 'wb') as f:
        f.write(b'not a checkpoint')
    assert find_latest_valid_checkpoint(work_dir) == epoch_1


def test_a_marker_naming_a_missing_file_or_no_checkpoint_at_all(run_dir, mmengine_log):
    work_dir, paths = run_dir
    os.remove(paths[1])
    assert find_latest_valid_checkpoint(work_dir) == paths[2]
    assert f'skipping checkpoint {paths[1]}: it does not exist' in mmengine_log
    for path in paths:
        if osp.exists(path):
            os.remove(path)
    assert find_latest_valid_checkpoint(work_dir) is None
    assert any(m.startswith('no checkpoint to resume from') for m in mmengine_log)


def test_a_file_without_training_meta_is_not_resumed_from(tmp_path):
    path = str(tmp_path / 'epoch_1.pth')
    torch.save(dict(state_dict=dict(w=torch.ones(2))), path)
    assert checkpoint_problem(path) == 'it is not a training checkpoint (no meta.iter)'
    assert find_latest_valid_checkpoint(str(tmp_path)) is None
