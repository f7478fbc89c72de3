"""What the fault tests share: test-only hooks injected into a training process, and runs of
tools/train.py compared by their final weights."""
import os
import os.path as osp
import signal
import subprocess
import sys
import textwrap

import torch
from conftest import REPO_ROOT
from test_train_test_e2e import DEMO, last_checkpoint, run, write_config

from mmlinear.engine.hooks import REQUEUE_EXIT_CODE

# Imported by the training process through `custom_imports` (the module is written into a
# folder on its PYTHONPATH). Hooks only the tests need, registered into mmengine's HOOKS.
FAULT_HOOKS = '''
import errno
import os
import signal
import time

from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from mmlinear.utils import atomic_checkpoint

# FAULT_AT_WRITE=N makes the N-th atomic write of the process fail (each checkpoint is one
# write, then one for last_checkpoint): FAULT_KIND=kill writes half of it, then the process
# SIGKILLs itself (a kill during the write); FAULT_KIND=enospc raises ENOSPC (a full disk).
_writes = [0]
_write_all = atomic_checkpoint._write_all


def _faulty_write_all(f, data):
    _writes[0] += 1
    if _writes[0] == int(os.environ['FAULT_AT_WRITE']):
        if os.environ['FAULT_KIND'] == 'kill':
            f.write(data[:len(data) // 2])
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    _write_all(f, data)


if os.environ.get('FAULT_AT_WRITE'):
    atomic_checkpoint._write_all = _faulty_write_all


@HOOKS.register_module()
class WaitForSignalHook(Hook):
    """At iteration `at`, write `ready_file` and wait until the PreemptionHook has received
    a signal: the test's signal then arrives at that iteration, whatever the machine's speed."""

    priority = 'NORMAL'  # before the PreemptionHook (LOWEST) looks at its flag

    def __init__(self, at, ready_file):
        self.at = at
        self.ready_file = ready_file

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        preemption = [h for h in runner.hooks if type(h).__name__ == 'PreemptionHook']
        if runner.iter + 1 != self.at or not preemption:
            return
        preemption = preemption[0]
        with open(self.ready_file, 'w') as f:
            f.write(str(os.getpid()))
        while preemption.received is None:
            time.sleep(0.01)  # wakes for the handler; how long it waits decides nothing


@HOOKS.register_module()
class ExitOnceHook(Hook):
    """Rank `rank` dies (os._exit, no clean-up, as a crashed worker) after iteration `at`,
    once: `once_file` records that it happened."""

    def __init__(self, at, rank, once_file):
        self.at = at
        self.rank = rank
        self.once_file = once_file

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if runner.iter + 1 == self.at and runner.rank == self.rank and \\
                not os.path.exists(self.once_file):
            with open(self.once_file, 'w') as f:
                f.write(str(runner.iter + 1))
            os._exit(3)
'''


def hooks_dir(tmp_path) -> str:
    """A folder holding the module ``fault_hooks`` (add it to the run's PYTHONPATH)."""
    folder = tmp_path / 'fault_hooks'
    folder.mkdir(exist_ok=True)
    (folder / 'fault_hooks.py').write_text(textwrap.dedent(FAULT_HOOKS))
    return str(folder)


def env_with(*paths, **variables) -> dict:
    """The environment with ``paths`` in front of PYTHONPATH, and ``variables``."""
    path = os.pathsep.join([*paths, os.environ.get('PYTHONPATH', '')])
    return dict(os.environ, PYTHONPATH=path, **variables)


def with_fault_hooks(body: str, hooks) -> str:
    """Config lines that import ``fault_hooks`` and set ``custom_hooks`` to ``hooks`` (config
    source strings; a child's list replaces its base's, so a config's own hooks go in too)."""
    return body + (f"\ncustom_imports = dict(imports=['mmlinear.models', 'fault_hooks'], "
                   f"allow_failed_imports=False)\ncustom_hooks = [{', '.join(hooks)}]\n")


def tiny_classifier_config(tmp_path, data: str, batch_size: int, epochs: int, checkpoint: str,
                           hooks) -> str:
    """The demo classifier at the 'infvit-test' size on the tiny sets, as ``cls.py`` with the
    fault hooks ``hooks``; ``checkpoint`` is the CheckpointHook's options (a dict's body)."""
    return write_config(
        tmp_path, 'cls.py',
        with_fault_hooks(
            f'''
_base_ = ['{DEMO}/infvit-demo-linear_shapes-cls.py']
model = dict(backbone=dict(arch='infvit-test'), head=dict(in_channels=32))
train_dataloader = dict(batch_size={batch_size}, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root='{data}/cls'))
val_dataloader = dict(num_workers=0, persistent_workers=False,
                      dataset=dict(data_root='{data}/cls'))
test_dataloader = val_dataloader
train_cfg = dict(max_epochs={epochs}, val_interval={epochs})
default_hooks = dict(checkpoint=dict({checkpoint}))
''', hooks))


def wait_hook(at, tmp_path) -> str:
    """The WaitForSignalHook of iteration ``at`` (inactive in a run without --preemptible)."""
    return f"dict(type='WaitForSignalHook', at={at}, ready_file='{tmp_path / 'ready'}')"


def final_weights(work_dir):
    """The state dict of the checkpoint ``last_checkpoint`` names."""
    return torch.load(
        last_checkpoint(work_dir), map_location='cpu', weights_only=True)['state_dict']


def assert_same_weights(actual, expected):
    """Bit for bit: the same keys and equal tensors."""
    assert actual.keys() == expected.keys()
    different = [k for k in expected if not torch.equal(actual[k], expected[k])]
    assert not different, f'{len(different)} of {len(expected)} tensors differ: {different[:5]}'


def train(config, work_dir, tmp_path, *args):
    """Run tools/train.py (with ``fault_hooks`` importable); return its output."""
    return run(['tools/train.py', config, '--work-dir', work_dir, *args],
               env=env_with(hooks_dir(tmp_path)))


def preempt(config, work_dir, at, tmp_path, *args, signal_name='SIGTERM', whole_group=False):
    """Train ``config`` (holding :func:`wait_hook` of ``at``) with ``--preemptible`` and
    ``args``, send it ``signal_name`` once it has reached iteration ``at``, and check the exit
    status and checkpoint.

    Args:
        whole_group (bool): Start the run in a process group of its own and signal every
            process of it, its data-loading workers included (as Slurm and ``timeout`` do),
            rather than the main process alone.

    Returns:
        str: The preemption checkpoint.
    """
    ready = str(tmp_path / 'ready')
    command = [
        sys.executable, 'tools/train.py', config, '--work-dir', work_dir, '--preemptible', *args
    ]
    log_path = tmp_path / 'preempted.log'
    with open(log_path, 'w') as log:
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            stdout=log,
            stderr=log,
            env=env_with(hooks_dir(tmp_path)),
            process_group=0 if whole_group else None)
        # No deadline: the run waits at iteration `at` for the signal, or ends (a failure).
        while not osp.exists(ready) and process.poll() is None:
            try:
                process.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
        if process.poll() is None:
            signum = signal.Signals[signal_name]
            if whole_group:
                os.killpg(process.pid, signum)
            else:
                process.send_signal(signum)
        status = process.wait()
    output = log_path.read_text()
    assert status == REQUEUE_EXIT_CODE, f'exit status {status}:\n{output[-3000:]}'
    assert f'{signal_name}: saving a checkpoint at iteration {at}' in output, output[-3000:]
    checkpoint = last_checkpoint(work_dir)
    assert osp.basename(checkpoint) == f'iter_{at}.pth'
    assert torch.load(checkpoint, map_location='cpu', weights_only=True)['meta']['iter'] == at
    return checkpoint
