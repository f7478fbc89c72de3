"""A kill during a checkpoint write never leaves ``last_checkpoint`` naming a torn file, a
truncated checkpoint is skipped on resume with a message naming it, and a full disk stops the
run with a clear error and leaves the previous checkpoint and marker as they were."""
import glob
import os
import os.path as osp
import subprocess
import sys

import torch
from conftest import REPO_ROOT
from fault_harness import env_with, hooks_dir, tiny_classifier_config
from test_train_test_e2e import last_checkpoint, run

from mmlinear.utils import checkpoint_problem


def cls_config(tmp_path, data, epochs, keep):
    return tiny_classifier_config(tmp_path, data, 16, epochs, f'interval=1, max_keep_ckpts={keep}',
                                  [])


def train_with_fault(config, work_dir, tmp_path, at_write, kind):
    """tools/train.py whose ``at_write``-th atomic write fails as ``kind`` ('kill', 'enospc')."""
    return subprocess.run([sys.executable, 'tools/train.py', config, '--work-dir', work_dir],
                          cwd=REPO_ROOT,
                          capture_output=True,
                          text=True,
                          env=env_with(
                              hooks_dir(tmp_path), FAULT_AT_WRITE=str(at_write), FAULT_KIND=kind))


def test_kill_during_a_write_then_a_truncated_checkpoint_resume_from_the_newest_whole_one(
        tiny_data, tmp_path):
    work_dir = str(tmp_path / 'work')
    config = cls_config(tmp_path, tiny_data, epochs=3, keep=-1)
    # Writes: epoch_1, marker, epoch_2, marker, epoch_3 (killed half-way).
    result = train_with_fault(config, work_dir, tmp_path, at_write=5, kind='kill')
    assert result.returncode == -9, result.stderr[-3000:]
    epoch_2 = osp.join(work_dir, 'epoch_2.pth')
    assert last_checkpoint(work_dir) == epoch_2 and checkpoint_problem(epoch_2) is None
    assert not osp.exists(osp.join(work_dir, 'epoch_3.pth'))
    torn = glob.glob(osp.join(work_dir, '.epoch_3.pth.*.tmp'))
    assert len(torn) == 1 and checkpoint_problem(torn[0]) is not None  # the half-written bytes

    # The newest checkpoint is then damaged (as a disk might): the resume takes epoch_1.
    with open(epoch_2, 'r+b') as f:
        f.truncate(os.path.getsize(epoch_2) // 2)
    saved_iter = torch.load(osp.join(work_dir, 'epoch_1.pth'), weights_only=True)['meta']['iter']
    log = run(['tools/train.py', config, '--work-dir', work_dir, '--resume'],
              env=env_with(hooks_dir(tmp_path)))
    assert f'skipping checkpoint {epoch_2}: it cannot be read' in log
    assert f'resuming from {osp.join(work_dir, "epoch_1.pth")}, the newest readable ' \
        'checkpoint' in log
    assert f'resumed epoch: 1, iter: {saved_iter}' in log
    final = osp.join(work_dir, 'epoch_3.pth')
    assert last_checkpoint(work_dir) == final and checkpoint_problem(final) is None
    assert checkpoint_problem(epoch_2) is None  # written again, whole
    assert not glob.glob(osp.join(work_dir, '.*.tmp'))  # the torn write was cleared away


def test_full_disk_stops_with_a_clear_error_and_keeps_the_previous_checkpoint(tiny_data, tmp_path):
    work_dir = str(tmp_path / 'work')
    # One checkpoint kept: mmengine 0.10.7 deletes it before writing the next one.
    config = cls_config(tmp_path, tiny_data, epochs=2, keep=1)
    result = train_with_fault(config, work_dir, tmp_path, at_write=3, kind='enospc')
    assert result.returncode == 1
    epoch_1, epoch_2 = (osp.join(work_dir, f'epoch_{i}.pth') for i in (1, 2))
    assert (f'cannot write {epoch_2}: No space left on device (the disk is full: free space, '
            f'then resume); {epoch_2} and every earlier checkpoint and last_checkpoint were left '
            'as they were') in result.stderr, result.stderr[-3000:]
    assert last_checkpoint(work_dir) == epoch_1 and checkpoint_problem(epoch_1) is None
    assert not osp.exists(epoch_2) and not glob.glob(osp.join(work_dir, '.*.tmp'))
