"""WeightFormer's ImageNet configs run the reference's learning-rate schedule, its linear
scaling rule and its weight-decay groups (LeapLabTHU/WeightFormer: `config.py` defaults,
`main.py`, `lr_scheduler.py`, `optimizer.py`), written out here from the reference code."""
import math
import os.path as osp

import pytest
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope
from recipe_harness import lr_curve, weight_decay_of, with_auto_scale_lr

import mmlinear  # noqa: F401

CONFIGS = [
    osp.join(REPO_ROOT, 'configs', 'weightformer', name)
    for name in ('weightformer-t_8xb256-amp_in1k.py', 'weightformer-s_8xb256-amp_in1k.py',
                 'weightformer-b_8xb256_in1k-448px.py')
]
EPOCH_LENGTH = 4  # iterations per epoch in these tests (the schedule is per iteration)


def reference_lrs(total_batch, epoch_length, epochs=300, warmup_epochs=20):
    """The lr of every optimizer step of the reference run.

    main.py scales BASE_LR 5e-4, WARMUP_LR 5e-7 and MIN_LR 5e-6 by total_batch / 512;
    lr_scheduler.py builds timm's CosineLRScheduler(t_initial=epochs * L, warmup_t=20 * L,
    lr_min, warmup_lr_init, cycle_limit=1, t_in_epochs=False; warmup_prefix left False),
    which sets the warm-up lr when it is created; the loop calls
    step_update(epoch * L + idx) after optimizer step idx.
    """
    base, warmup_lr, min_lr = (value * total_batch / 512.0 for value in (5e-4, 5e-7, 5e-6))
    t_initial, warmup_t = epochs * epoch_length, warmup_epochs * epoch_length

    def timm_cosine(t):  # CosineLRScheduler._get_lr
        if t < warmup_t:
            return warmup_lr + t * (base - warmup_lr) / warmup_t
        return min_lr + 0.5 * (base - min_lr) * (1 + math.cos(math.pi * t / t_initial))

    lrs, lr = [], warmup_lr
    for num_updates in range(t_initial):
        lrs.append(lr)
        lr = timm_cosine(num_updates)
    return lrs


@pytest.mark.parametrize('path', CONFIGS, ids=osp.basename)
@pytest.mark.parametrize('gpus,per_gpu', [(8, 256), (4, 64)], ids=['2048', '256'])
def test_lr_follows_the_reference_schedule_and_batch_scaling(path, gpus, per_gpu):
    cfg = Config.fromfile(path)
    assert cfg.train_dataloader.batch_size == 256 and cfg.train_cfg.max_epochs == 300
    ours = lr_curve(cfg, batch_size=per_gpu, world_size=gpus, epoch_length=EPOCH_LENGTH)
    reference = reference_lrs(gpus * per_gpu, EPOCH_LENGTH)
    assert len(ours) == len(reference) == 300 * EPOCH_LENGTH
    assert ours == pytest.approx(reference, rel=1e-9, abs=0)
    scale = gpus * per_gpu / 2048
    warmup_end, middle = 20 * EPOCH_LENGTH, 150 * EPOCH_LENGTH
    # first iteration: the warm-up start 5e-7 per 512 images
    assert ours[0] == pytest.approx(2e-6 * scale, rel=1e-12)
    # last warm-up iteration (the schedule at step W - 2, one short of the peak)
    assert ours[warmup_end - 1] == pytest.approx(
        (2e-6 + (warmup_end - 2) * (2e-3 - 2e-6) / warmup_end) * scale, rel=1e-12)
    # first iteration after the warm-up: the cosine over all 300 epochs, not restarted
    assert ours[warmup_end + 1] == pytest.approx(
        (2e-5 + 0.5 * (2e-3 - 2e-5) * (1 + math.cos(math.pi * 20 / 300))) * scale, rel=1e-12)
    # middle: halfway between the peak and the floor (one step after the half)
    assert ours[middle + 1] == pytest.approx((2e-5 + 2e-3) / 2 * scale, rel=1e-12)
    # epoch 160: about 9.07e-4 at batch 2048 (a cosine restarted at epoch 20 gives 1.01e-3)
    assert ours[160 * EPOCH_LENGTH + 1] == pytest.approx(9.07e-4 * scale, rel=1e-3)
    # last iteration: just above the floor 5e-6 per 512 images
    assert ours[-1] == pytest.approx(
        (2e-5 + 0.5 * (2e-3 - 2e-5) * (1 + math.cos(math.pi * (300 * EPOCH_LENGTH - 2) /
                                                    (300 * EPOCH_LENGTH)))) * scale,
        rel=1e-12)


def test_scaling_is_on_without_the_auto_scale_lr_flag():
    cfg = Config.fromfile(CONFIGS[0])
    assert cfg.auto_scale_lr == dict(base_batch_size=2048, enable=True)
    # Turning it off (the old behaviour) would train at 2e-3 whatever the batch.
    off = lr_curve(
        with_auto_scale_lr(cfg, False), batch_size=64, world_size=4, epoch_length=EPOCH_LENGTH)
    assert off == pytest.approx(reference_lrs(2048, EPOCH_LENGTH), rel=1e-9)


def reference_decays(name, param):
    """optimizer.py set_weight_decay_and_lr: no decay for 1-D parameters, names ending in
    '.bias' and the model's no_weight_decay() names; the rest decays."""
    name = name.split('.', 1)[1]  # our 'backbone.' / 'head.' prefix
    return not (param.ndim == 1 or name.endswith('.bias')
                or name in ('pos_embed', 'cls_token', 'dist_token'))


@pytest.mark.parametrize('path', CONFIGS[:2], ids=osp.basename)
def test_weight_decay_groups_are_the_references(path):
    cfg = Config.fromfile(path)
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    decay = weight_decay_of(cfg, model)
    params = dict(model.named_parameters())
    for name, param in params.items():
        assert decay[name] == (0.05 if reference_decays(name, param) else 0.0), name
    # The cases the reference rule exists for: the dynamic layers' 2-D / 4-D tensors decay,
    # their 1-D `.b` does not (it does not end in '.bias').
    dynamic = [name for name in params if name.rsplit('.', 1)[1] in ('w', 'w1', 'w2', 'b')]
    assert {name.rsplit('.', 1)[1] for name in dynamic} == {'w', 'w1', 'w2', 'b'}
    for name in dynamic:
        assert (decay[name] == 0.0) == name.endswith('.b'), name
