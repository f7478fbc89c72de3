"""A training run killed with SIGKILL after a checkpoint resumes from it with ``--resume``."""
import hashlib
import os
import os.path as osp
import re
import signal
import subprocess
import sys
import tempfile
import time

import torch
from conftest import REPO_ROOT
from test_train_test_e2e import cls_config, last_checkpoint, run

import mmlinear  # noqa: F401  (checkpoints load under the weights-only allowlist)


def digest(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def kill_after_checkpoint(command, work_dir, epoch):
    """Start ``command`` and SIGKILL it once ``last_checkpoint`` names ``epoch_<epoch>.pth``
    or a later one (mmengine writes that file only after the checkpoint itself).

    There is no wall-clock deadline, so a slow or loaded machine only makes the wait longer:
    the loop ends either at the checkpoint or when the run ends by itself (a failure).
    """
    # stderr goes to a file, not a pipe: a full pipe would block the run, and so this wait.
    with tempfile.TemporaryFile('w+') as stderr:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
        marker = osp.join(work_dir, 'last_checkpoint')
        while process.poll() is None:
            # The marker may be caught while mmengine is still writing it (empty or partial):
            # only a complete ``epoch_<n>.pth`` name counts.
            written = re.search(r'epoch_(\d+)\.pth$',
                                last_checkpoint(work_dir)) if osp.exists(marker) else None
            if written and int(written.group(1)) >= epoch:
                process.send_signal(signal.SIGKILL)
                process.wait()
                return int(written.group(1))
            time.sleep(0.05)
        stderr.seek(0)
        raise AssertionError(f'training ended (exit code {process.returncode}) before it was '
                             'killed:\n' + stderr.read()[-3000:])


def test_sigkill_then_resume_continues_with_the_saved_state(tiny_data, tmp_path):
    work_dir = str(tmp_path / 'work')
    # Far more epochs than can pass before the kill: the run cannot finish on its own.
    config = cls_config(tmp_path, tiny_data, epochs=100)
    saved_epoch = kill_after_checkpoint([
        sys.executable, 'tools/train.py', config, '--work-dir', work_dir, '--cfg-options',
        'default_hooks.checkpoint.max_keep_ckpts=-1'
    ],
                                        work_dir,
                                        epoch=2)
    killed_at = last_checkpoint(work_dir)
    saved = torch.load(killed_at, map_location='cpu', weights_only=True)
    saved_iter = saved['meta']['iter']
    saved_steps = {k: v['step'].item() for k, v in saved['optimizer']['state'].items()}
    assert saved['meta']['epoch'] == saved_epoch and saved_iter > 0
    assert set(saved_steps.values()) == {saved_iter}  # AdamW has stepped once per iteration
    before = {
        name: digest(osp.join(work_dir, name))
        for name in os.listdir(work_dir) if name.endswith('.pth')
    }

    final_epoch = saved_epoch + 2
    log = run([
        'tools/train.py', config, '--work-dir', work_dir, '--resume', '--cfg-options',
        f'train_cfg.max_epochs={final_epoch}', 'default_hooks.checkpoint.max_keep_ckpts=-1'
    ])
    assert f'resumed epoch: {saved_epoch}, iter: {saved_iter}' in log
    final = torch.load(last_checkpoint(work_dir), map_location='cpu', weights_only=True)
    assert final['meta']['epoch'] == final_epoch
    iters_per_epoch = saved_iter // saved_epoch
    assert final['meta']['iter'] == final_epoch * iters_per_epoch
    # The optimizer continued from the saved state: its step counts went on from there
    # (a fresh optimizer would count only the iterations after the resume).
    final_steps = {k: v['step'].item() for k, v in final['optimizer']['state'].items()}
    assert final_steps.keys() == saved_steps.keys()
    assert set(final_steps.values()) == {final_epoch * iters_per_epoch}
    # Nothing already saved was lost or rewritten.
    for name, value in before.items():
        assert digest(osp.join(work_dir, name)) == value, name
