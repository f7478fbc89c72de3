"""``tools/dist_train.sh`` restarts a group whose worker died: the restarted workers resume
from the newest checkpoint and finish with the weights of a run that was never interrupted."""
import math
import os
import os.path as osp
import subprocess
import sys

import pytest
from conftest import REPO_ROOT
from fault_harness import (assert_same_weights, env_with, final_weights, hooks_dir,
                           tiny_classifier_config)
from test_distributed import free_port
from test_preemption import train_images


def dist_train(config, work_dir, tmp_path, max_restarts):
    result = subprocess.run(['bash', 'tools/dist_train.sh', config, '2', '--work-dir', work_dir],
                            cwd=REPO_ROOT,
                            capture_output=True,
                            text=True,
                            env=env_with(
                                hooks_dir(tmp_path),
                                PYTHON=sys.executable,
                                PORT=str(free_port()),
                                MAX_RESTARTS=str(max_restarts)))
    # torchrun exits 0 only when every rank of the last attempt has exited 0.
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


@pytest.mark.slow  # two runs of two processes: about a minute on 2 busy cores
def test_a_killed_worker_restarts_the_group_which_resumes_and_matches(tiny_data, tmp_path):
    per_epoch = math.ceil(math.ceil(train_images(tiny_data) / 2) / 8)  # 2 ranks, batch 8
    saved = per_epoch + 1  # an iteration checkpoint inside epoch 2
    at = saved + 1  # rank 1 dies after this iteration
    assert at < 2 * per_epoch
    once = str(tmp_path / 'died')
    config = tiny_classifier_config(
        tmp_path, tiny_data, 8, 2, f'by_epoch=False, interval={saved}',
        [f"dict(type='ExitOnceHook', at={at}, rank=1, once_file='{once}')"])

    with open(once, 'w') as f:  # the uninterrupted run: the worker has "already died"
        f.write('0')
    dist_train(config, str(tmp_path / 'uninterrupted'), tmp_path, max_restarts=0)
    expected = final_weights(str(tmp_path / 'uninterrupted'))

    os.remove(once)
    work_dir = str(tmp_path / 'restarted')
    log = dist_train(config, work_dir, tmp_path, max_restarts=1)
    assert osp.exists(once)  # rank 1 did die
    assert 'restart' in log.lower()
    assert f'resumed epoch: 1, iter: {saved}' in log
    assert_same_weights(final_weights(work_dir), expected)
