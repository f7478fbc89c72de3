"""mmlinear.WarmupCosineLR: closed-form warm-up + cosine, both cosine phases, the one-step lag,
epoch conversion, resuming, and clear errors."""
import math

import pytest
import torch
from mmengine.optim import OptimWrapper
from mmengine.registry import PARAM_SCHEDULERS

from mmlinear.engine import WarmupCosineLR


def wrapper(lr=1.0):
    return OptimWrapper(torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=lr))


def run(scheduler, optim, steps):
    lrs = []
    for _ in range(steps):
        lrs.append(optim.param_groups[0]['lr'])
        optim.step()
        scheduler.step()
    return lrs


def expected(t, warmup=4, total=20, start=0.1, floor=0.01, prefix=False):
    if t < warmup:
        return start + t * (1 - start) / warmup
    progress = (t - warmup) / (total - warmup) if prefix else t / total
    return floor + 0.5 * (1 - floor) * (1 + math.cos(math.pi * progress))


@pytest.mark.parametrize('prefix', [False, True])
@pytest.mark.parametrize('lag', [False, True])
def test_values_follow_the_closed_form(prefix, lag):
    optim = wrapper()
    scheduler = WarmupCosineLR(
        optim,
        warmup_length=4,
        warmup_start_factor=0.1,
        eta_min_ratio=0.01,
        warmup_prefix=prefix,
        lag_one_step=lag,
        by_epoch=False,
        end=20)
    lrs = run(scheduler, optim, 20)
    for step, lr in enumerate(lrs):
        t = max(step - 1, 0) if lag else step
        assert lr == pytest.approx(expected(t, prefix=prefix), rel=1e-12), step
    assert lrs[0] == pytest.approx(0.1)
    if prefix:
        assert lrs[5 if lag else 4] == pytest.approx(1.0)  # the cosine starts at the peak
    else:
        assert max(lrs) < 1.0  # the warm-up never reaches the peak of a cosine begun at 0


def test_factors_are_relative_to_each_groups_initial_lr():
    model = torch.nn.Linear(1, 1)
    optim = OptimWrapper(
        torch.optim.SGD([dict(params=[model.weight], lr=2.0),
                         dict(params=[model.bias], lr=0.5)]))
    scheduler = WarmupCosineLR(
        optim, warmup_length=2, warmup_start_factor=0.5, eta_min_ratio=0.1, by_epoch=False, end=10)
    # (mmengine's wrapper appends a group of its own after these two)
    assert [g['lr'] for g in optim.param_groups[:2]] == [1.0, 0.25]
    run(scheduler, optim, 9)
    final = [g['lr'] for g in optim.param_groups[:2]]
    assert final[0] == pytest.approx(4 * final[1])
    assert final[1] == pytest.approx(0.05 + 0.5 * 0.45 * (1 + math.cos(math.pi * 9 / 10)))


def test_epoch_based_config_converts_to_iterations():
    optim = wrapper()
    scheduler = PARAM_SCHEDULERS.build(
        dict(
            type='mmlinear.WarmupCosineLR',
            warmup_length=2,
            warmup_start_factor=0.1,
            eta_min_ratio=0.01,
            by_epoch=True,
            begin=0,
            end=10,
            convert_to_iter_based=True),
        default_args=dict(optimizer=optim, epoch_length=3))
    assert isinstance(scheduler, WarmupCosineLR) and not scheduler.by_epoch
    assert (scheduler.warmup_length, scheduler.T_max, scheduler.end) == (6, 30, 30)
    lrs = run(scheduler, optim, 30)
    assert lrs == pytest.approx([expected(t, warmup=6, total=30) for t in range(30)])


def test_resuming_from_the_state_dict_continues_the_curve():
    optim = wrapper()
    kwargs = dict(
        warmup_length=4,
        warmup_start_factor=0.1,
        eta_min_ratio=0.01,
        lag_one_step=True,
        by_epoch=False,
        end=20)
    scheduler = WarmupCosineLR(optim, **kwargs)
    full = run(scheduler, optim, 20)
    optim = wrapper()
    first = WarmupCosineLR(optim, **kwargs)
    head = run(first, optim, 7)
    state = first.state_dict()
    resumed_optim = wrapper()
    resumed_optim.param_groups[0]['initial_lr'] = 1.0
    resumed = WarmupCosineLR(resumed_optim, **kwargs)
    resumed.load_state_dict(state)
    resumed_optim.param_groups[0]['lr'] = optim.param_groups[0]['lr']
    assert head + run(resumed, resumed_optim, 13) == pytest.approx(full)


@pytest.mark.parametrize('kwargs,match', [
    (dict(warmup_length=-1, end=10), 'warmup_length must be an int >= 0'),
    (dict(warmup_length=2.5, end=10), 'warmup_length must be an int >= 0'),
    (dict(warmup_length=10, end=10), 'T_max must be an int > warmup_length=10'),
    (dict(warmup_length=2), 'needs T_max or a finite end'),
    (dict(warmup_length=2, end=10,
          warmup_start_factor=1.5), r'warmup_start_factor must be in \[0, 1\]'),
    (dict(warmup_length=2, end=10, eta_min_ratio=-0.1), r'eta_min_ratio must be in \[0, 1\]'),
])
def test_bad_arguments_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        WarmupCosineLR(wrapper(), by_epoch=False, **kwargs)
