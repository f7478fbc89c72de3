"""ElasticCoreBudgetHook and MultiResolutionHook: the draws, their sharing across ranks, and
their effect on a real training run."""
import os
import os.path as osp
import socket
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner

from mmlinear.cli import fix_dataloaders
from mmlinear.engine.hooks import (ElasticCoreBudgetHook, MultiResolutionHook, draw_shared,
                                   sampling_probabilities, shared_seed)


def frequencies(values, choices):
    values = np.asarray(values)
    return np.array([(values == c).mean() for c in choices])


def test_budget_draws_follow_the_reference_weights():
    hook = ElasticCoreBudgetHook(seed=3)
    n = 20000
    draws = [hook.draw(i) for i in range(n)]
    expected = np.array([1, 1, 2, 2, 3, 3, 4, 4]) / 20
    np.testing.assert_allclose(hook.probs, expected)
    freq = frequencies(draws, hook.budgets)
    # Each frequency within 4 binomial standard deviations of its probability.
    assert (np.abs(freq - expected) < 4 * np.sqrt(expected * (1 - expected) / n)).all(), freq
    assert abs(np.mean(draws) - 44) < 0.5  # E[K] = sum(w_i K_i) / sum(w_i) = 880 / 20 = 44


def test_budget_draws_depend_only_on_seed_and_iteration():
    first, second = ElasticCoreBudgetHook(seed=7), ElasticCoreBudgetHook(seed=7)
    sequence = [first.draw(i) for i in range(200)]
    # A second "rank" (or a resumed run) drawing in another order gets the same budgets.
    assert [second.draw(i) for i in reversed(range(200))][::-1] == sequence
    assert [ElasticCoreBudgetHook(seed=8).draw(i) for i in range(200)] != sequence
    assert len(set(sequence)) == 8


def test_custom_budgets_and_invalid_options():
    hook = ElasticCoreBudgetHook(budgets=(16, 64), weights=(1, 3), seed=0)
    freq = frequencies([hook.draw(i) for i in range(4000)], (16, 64))
    assert abs(freq[1] - 0.75) < 0.03
    with pytest.raises(ValueError, match='active_cores must be one of \\(8, 16'):
        ElasticCoreBudgetHook(budgets=(12, 64), weights=(1, 1))
    with pytest.raises(ValueError, match='equal length'):
        ElasticCoreBudgetHook(budgets=(8, 64), weights=(1, ))
    with pytest.raises(ValueError, match='non-negative'):
        ElasticCoreBudgetHook(budgets=(8, 64), weights=(-1, 2))
    with pytest.raises(ValueError, match='got 72'):
        ElasticCoreBudgetHook(eval_cores=72)
    with pytest.raises(ValueError, match='must not repeat'):
        ElasticCoreBudgetHook(budgets=(8, 8), weights=(1, 1))


def test_resolution_draws_follow_the_two_phases():
    hook = MultiResolutionHook(seed=1)
    phase_a = [hook.draw(i) for i in range(7000)]
    phase_b = [hook.draw(i) for i in range(7000, 27000)]
    assert 768 not in phase_a
    np.testing.assert_allclose(
        frequencies(phase_a, hook.resolutions), [0.35, 0.35, 0.30, 0.0], atol=0.025)
    np.testing.assert_allclose(
        frequencies(phase_b, hook.resolutions), [0.15, 0.25, 0.30, 0.30], atol=0.015)
    with pytest.raises(ValueError, match='multiples of 16'):
        MultiResolutionHook(resolutions=(250, ), phases=[dict(begin=0, weights=(1, ))])
    with pytest.raises(ValueError, match='begin=0'):
        MultiResolutionHook(phases=[dict(begin=5, weights=(1, 1, 1, 1))])


def test_hooks_draw_independent_streams():
    cores, sizes = ElasticCoreBudgetHook(seed=5), MultiResolutionHook(seed=5)
    probs = sampling_probabilities('x', (0, 1), (1, 1))
    same_stream = [draw_shared(5, i, 0, (0, 1), probs) for i in range(300)]
    other_stream = [draw_shared(5, i, 1, (0, 1), probs) for i in range(300)]
    assert same_stream != other_stream
    assert cores.stream != sizes.stream


def test_resolution_hook_resizes_the_batch_in_place():
    hook = MultiResolutionHook(resolutions=(32, 48), phases=[dict(begin=0, weights=(1, 1))], seed=0)
    runner = SimpleNamespace(iter=0, message_hub=SimpleNamespace(update_scalar=lambda *a: 0))
    for iteration in range(6):
        runner.iter = iteration
        batch = dict(inputs=torch.randint(0, 256, (2, 3, 64, 64), dtype=torch.uint8))
        hook.before_train_iter(runner, iteration, batch)
        size = hook.draw(iteration)
        assert batch['inputs'].shape == (2, 3, size, size)
        assert 0 <= batch['inputs'].min() and batch['inputs'].max() <= 255


def _rank_worker(rank, port, results):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=2)
    try:
        # Ranks start with different run seeds, as with randomness.diff_rank_seed=True.
        seed = shared_seed(SimpleNamespace(seed=100 + rank), None)
        hook = ElasticCoreBudgetHook(seed=seed)
        results[rank] = (seed, [hook.draw(i) for i in range(50)])
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_draw_the_same_budgets():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    results = mp.Manager().dict()
    mp.spawn(_rank_worker, args=(port, results), nprocs=2, join=True)
    assert results[0][0] == results[1][0] == 100  # rank 0's seed is shared
    assert results[0][1] == results[1][1]


class ChunkUpdateRecorder(Hook):
    """Records, per iteration, the budget on the student and which core chunks the step
    changed (AdamW skips parameters without a gradient, so unused chunks stay bit-equal)."""

    def __init__(self):
        self.records = []

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        student = runner.model.student
        self._before = [chunk.detach().clone() for chunk in student.query_token_chunks]

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        student = runner.model.student
        changed = [
            not torch.equal(before, chunk)
            for before, chunk in zip(self._before, student.query_token_chunks)
        ]
        self.records.append((student.active_cores, changed))


def test_budget_is_applied_to_the_student_in_a_training_run(tiny_data, tmp_path):
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs/demo/veca-demo_distill_shapes.py'))
    cfg.model.student.arch = 'test'
    cfg.train_dataloader.update(batch_size=4, num_workers=0, persistent_workers=False)
    cfg.train_dataloader.dataset.data_root = f'{tiny_data}/cls'
    cfg.train_cfg = dict(by_epoch=False, max_iters=6)
    cfg.param_scheduler = []
    cfg.default_hooks.checkpoint = dict(type='CheckpointHook', interval=100)
    cfg.custom_hooks = [dict(type='mmlinear.ElasticCoreBudgetHook', seed=11)]
    cfg.work_dir = str(tmp_path)
    fix_dataloaders(cfg)
    runner = Runner.from_cfg(cfg)
    recorder = ChunkUpdateRecorder()
    runner.register_hook(recorder, priority='LOW')
    runner.train()
    reference = ElasticCoreBudgetHook(seed=11)
    assert [r[0] for r in recorder.records] == [reference.draw(i) for i in range(6)]
    for cores, changed in recorder.records:
        assert changed == [j < cores // 8 for j in range(8)], (cores, changed)
    assert runner.model.student.active_cores == 64  # the evaluation budget after training
