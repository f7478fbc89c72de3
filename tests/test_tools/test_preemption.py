"""A SIGTERM or SIGUSR1 mid-epoch, to the main process or to its whole process group (data-loading
workers included), gives a checkpoint at that iteration and exit status 75, and the run resumed
from it ends with the uninterrupted run's weights, bit for bit, for the demos."""
import glob
import math
import os.path as osp

import pytest
from fault_harness import (assert_same_weights, final_weights, preempt, train, wait_hook,
                           with_fault_hooks)
from test_train_test_e2e import DEMO, write_config

LOADERS = '''
train_dataloader = dict(batch_size={batch}, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root='{root}'))
val_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(data_root='{root}'))
test_dataloader = val_dataloader
'''
ELASTIC = "dict(type='mmlinear.ElasticCoreBudgetHook')"
# demo: (config body, its own custom hooks, batch size, epoch-based, drop_last)
DEMOS = {
    'cls': ('''
_base_ = ['{demo}/infvit-demo-linear_shapes-cls.py']
model = dict(backbone=dict(arch='infvit-test'), head=dict(in_channels=32))
''' + LOADERS.format(batch=8, root='{data}/cls') + '''
train_cfg = dict(max_epochs=2, val_interval=2)
''', [], 8, True, False),
    'veca-elastic': ('''
_base_ = ['{demo}/veca-demo-elastic_shapes-cls.py']
model = dict(backbone=dict(arch='test'), head=dict(in_channels=64))
''' + LOADERS.format(batch=8, root='{data}/cls') + '''
train_cfg = dict(max_epochs=2, val_interval=2)
''', [ELASTIC], 8, True, False),
    'veca-distill': ('''
_base_ = ['{demo}/veca-demo_distill_shapes.py']
model = dict(student=dict(arch='test'))
train_dataloader = dict(batch_size=8, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root='{data}/cls'))
train_cfg = dict(max_epochs=2)
''', [ELASTIC], 8, True, True),
    'upernet': ('''
_base_ = ['{demo}/upernet_infvit-demo-linear_shapes-ade.py']
model = dict(backbone=dict(arch='infvit-test', init_cfg=None), neck=dict(in_channels=32),
             decode_head=dict(in_channels=[16, 32, 32]), auxiliary_head=dict(in_channels=32))
''' + LOADERS.format(batch=2, root='{data}/ade') + '''
train_cfg = dict(max_iters=6, val_interval=6)
default_hooks = dict(checkpoint=dict(interval=2))
''', [], 2, False, False),
}


def train_images(data):
    return len(glob.glob(osp.join(data, 'cls', 'train', '*', '*.png')))


# The demo classifier is checked as shipped by default (below); these runs of the tests' small
# demos, with --run-slow.
@pytest.mark.parametrize('demo', [
    pytest.param('cls', marks=pytest.mark.slow),
    pytest.param('veca-elastic', marks=pytest.mark.slow),
    pytest.param('veca-distill', marks=pytest.mark.slow),
    pytest.param('upernet', marks=pytest.mark.slow)
])
def test_sigterm_checkpoints_the_iteration_and_the_resumed_run_ends_with_the_same_weights(
        demo, tiny_data, tmp_path):
    body, hooks, batch, by_epoch, drop_last = DEMOS[demo]
    if by_epoch:
        per_epoch = (math.floor if drop_last else math.ceil)(train_images(tiny_data) / batch)
        assert per_epoch >= 2
        at = per_epoch + per_epoch // 2  # inside the second epoch
    else:
        at = 3  # between the iteration checkpoints at 2 and 4
    body = body.format(demo=DEMO, data=tiny_data)
    config = write_config(tmp_path, f'{demo}.py',
                          with_fault_hooks(body, hooks + [wait_hook(at, tmp_path)]))

    expected = final_weights_of(config, str(tmp_path / 'uninterrupted'), tmp_path)
    work_dir = str(tmp_path / 'preempted')
    preempt(config, work_dir, at, tmp_path)
    log = train(config, work_dir, tmp_path, '--resume')
    if by_epoch:
        assert f'resumed epoch: 1, iter: {at}' in log
        assert f'skipping the {at - per_epoch} batches of epoch 2 trained before the ' \
            'checkpoint' in log
    else:
        assert f'resumed epoch: 0, iter: {at}' in log
    assert_same_weights(final_weights(work_dir), expected)


def final_weights_of(config, work_dir, tmp_path):
    train(config, work_dir, tmp_path)
    return final_weights(work_dir)


# The demo classifier as shipped (two persistent workers for training and for validation) on
# the tests' data. Validation after each epoch: its workers are alive when the signal comes.
SHIPPED_CLS = '''
_base_ = ['{demo}/infvit-demo-linear_shapes-cls.py']
train_dataloader = dict(dataset=dict(data_root='{data}/cls'))
val_dataloader = dict(dataset=dict(data_root='{data}/cls'))
test_dataloader = val_dataloader
'''
SHORT = ['train_cfg.max_epochs=2', 'train_cfg.val_interval=1']
# How the loaders load: the options that change the shipped config.
WORKERS = {
    '2 persistent workers': [],
    '2 workers per epoch':
    ['train_dataloader.persistent_workers=False', 'val_dataloader.persistent_workers=False'],
    'no workers': [
        f'{loader}.{option}' for loader in ('train_dataloader', 'val_dataloader')
        for option in ('num_workers=0', 'persistent_workers=False')
    ],
}


def shipped_cls_config(folder, data: str, at: int) -> str:
    """The shipped demo classifier on ``data`` with the hook waiting for a signal at ``at``."""
    return write_config(
        folder, 'cls.py',
        with_fault_hooks(SHIPPED_CLS.format(demo=DEMO, data=data), [wait_hook(at, folder)]))


@pytest.fixture(scope='module')
def shipped_cls(tiny_data, tmp_path_factory):
    """An iteration in the middle of epoch 2, the iterations of an epoch and a function giving
    the final weights of an uninterrupted run for a key of WORKERS (each trained once)."""
    per_epoch = math.ceil(train_images(tiny_data) / 64)  # the shipped batch size
    assert per_epoch >= 2
    at = per_epoch + per_epoch // 2
    folder = tmp_path_factory.mktemp('uninterrupted')
    config = shipped_cls_config(folder, tiny_data, at)
    uninterrupted = {}

    def expected(workers):
        if workers not in uninterrupted:
            work_dir = str(folder / workers.replace(' ', '_'))
            train(config, work_dir, folder, '--cfg-options', *SHORT, *WORKERS[workers])
            uninterrupted[workers] = final_weights(work_dir)
        return uninterrupted[workers]

    return at, per_epoch, expected


CASES = [
    pytest.param(
        signal_name,
        whole_group,
        workers,
        marks=() if (signal_name, whole_group,
                     workers) == ('SIGTERM', True, '2 persistent workers') else pytest.mark.slow,
        id=f'{signal_name}-{"group" if whole_group else "main"}-{workers.replace(" ", "_")}')
    for signal_name in ('SIGTERM', 'SIGUSR1') for whole_group in (True, False)
    for workers in WORKERS
]


@pytest.mark.parametrize('signal_name, whole_group, workers', CASES)
def test_a_signal_to_the_main_process_or_the_whole_group_checkpoints_and_resumes_exactly(
        signal_name, whole_group, workers, shipped_cls, tiny_data, tmp_path):
    at, per_epoch, expected = shipped_cls
    config = shipped_cls_config(tmp_path, tiny_data, at)
    options = ['--cfg-options', *SHORT, *WORKERS[workers]]
    work_dir = str(tmp_path / 'preempted')
    preempt(
        config, work_dir, at, tmp_path, *options, signal_name=signal_name, whole_group=whole_group)
    log = train(config, work_dir, tmp_path, '--resume', *options)
    assert f'resumed epoch: 1, iter: {at}' in log
    assert f'skipping the {at - per_epoch} batches of epoch 2 trained before the checkpoint' \
        in log
    assert_same_weights(final_weights(work_dir), expected(workers))


@pytest.mark.slow
def test_the_number_of_workers_and_their_persistence_change_no_weight(shipped_cls):
    *_, expected = shipped_cls
    for workers in WORKERS:
        assert_same_weights(expected(workers), expected('no workers'))
