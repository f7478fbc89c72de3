"""The random states a checkpoint carries (captured, saved under weights_only, restored) and
the batches a resumed epoch skips."""
import random
from types import SimpleNamespace

import numpy as np
import torch

from mmlinear.engine.exact_resume import ResumePoint, capture_rng_state, restore_rng_state


def draws():
    return (random.random(), random.gauss(0, 1), np.random.rand(3).tolist(), np.random.randn(),
            torch.rand(4).tolist(), torch.randn(2).tolist())


def test_restored_states_give_the_same_draws_after_a_weights_only_round_trip(tmp_path):
    np.random.randn()  # leaves a cached Gaussian in numpy's state
    state = capture_rng_state()
    expected = draws()
    path = tmp_path / 'state.pth'
    torch.save(state, path)
    draws()  # move every generator on
    restore_rng_state(torch.load(path, weights_only=True))
    assert draws() == expected


def loop_at(iteration, epoch, batches):
    return SimpleNamespace(iter=iteration, epoch=epoch, dataloader=range(batches))


def test_the_batches_to_skip_are_those_the_saved_epoch_had_trained(mmengine_log):
    point = ResumePoint(rng_states=[], batches_per_epoch=10)
    assert point.batches_to_skip(loop_at(23, 2, 10)) == 3  # mid-epoch
    assert point.batches_to_skip(loop_at(30, 3, 10)) == 0  # an epoch checkpoint
    assert not mmengine_log
    # Another number of batches per epoch (e.g. more processes): the epoch restarts.
    assert point.batches_to_skip(loop_at(23, 2, 5)) == 0
    assert mmengine_log == [
        'the checkpoint was written after 3 of the 10 batches of epoch 3, but an epoch now has '
        '5 (another batch size or number of processes): the epoch restarts from its first batch'
    ]
