"""InfViT's ImageNet configs run the "DeiT recipe, no distillation" of the paper as mmpretrain's
DeiT config (configs/deit/deit-base_16xb64_in1k.py) implements it: its learning-rate schedule,
its batch scaling and the DeiT weight-decay groups, written out here."""
import glob
import math
import os.path as osp

import pytest
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope
from recipe_harness import lr_curve, weight_decay_of, with_auto_scale_lr

import mmlinear  # noqa: F401

CONFIGS = sorted(glob.glob(osp.join(REPO_ROOT, 'configs', 'infvit', 'infvit-*_in1k.py')))
EPOCH_LENGTH = 4
# The same parameter names as the 4- and 24-layer presets, in a CPU-sized body.
SMALL = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)


def reference_lrs(base_lr,
                  epoch_length,
                  epochs=300,
                  warmup_epochs=20,
                  start_factor=1e-3,
                  eta_min=1e-5):
    """mmpretrain's DeiT schedule (schedules/imagenet_bs1024_adamw_swin.py) as mmengine runs
    it: a per-iteration linear warm-up over the 20 * L iterations of 20 epochs, from
    start_factor * lr at the first to lr at the last (mmengine's LinearLR spans end - begin - 1
    steps), then a cosine from lr to eta_min over the remaining 280 epochs, stepped once per
    epoch (the cosine is not converted to iterations)."""
    warmup = warmup_epochs * epoch_length
    lrs = []
    for it in range(epochs * epoch_length):
        if it < warmup:
            lrs.append(base_lr * (start_factor + (1 - start_factor) * it / (warmup - 1)))
        else:
            k = it // epoch_length - warmup_epochs
            cosine = 0.5 * (1 + math.cos(math.pi * k / (epochs - warmup_epochs)))
            lrs.append(eta_min + (base_lr - eta_min) * cosine)
    return lrs


@pytest.mark.parametrize('path', CONFIGS, ids=osp.basename)
def test_lr_follows_the_deit_schedule_at_the_reference_batch(path):
    cfg = Config.fromfile(path)
    assert cfg.train_dataloader.batch_size == 64 and cfg.train_cfg.max_epochs == 300
    ours = lr_curve(cfg, batch_size=64, world_size=16, epoch_length=EPOCH_LENGTH)
    reference = reference_lrs(1e-3, EPOCH_LENGTH)  # 5e-4 per 512 images at 16 x 64
    assert ours == pytest.approx(reference, rel=1e-9, abs=0)
    warmup = 20 * EPOCH_LENGTH
    assert ours[0] == pytest.approx(1e-6, rel=1e-12)  # first iteration
    assert ours[warmup - 1] == pytest.approx(1e-3, rel=1e-12)  # end of the warm-up
    assert ours[warmup] == pytest.approx(1e-3, rel=1e-12)  # the cosine starts at the peak
    assert ours[warmup + EPOCH_LENGTH - 1] == ours[warmup]  # ... and moves once per epoch
    assert ours[160 * EPOCH_LENGTH] == pytest.approx((1e-5 + 1e-3) / 2, rel=1e-9)  # middle
    assert ours[-1] == pytest.approx(  # last epoch: one cosine step above eta_min
        1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + math.cos(math.pi * 279 / 280)),
        rel=1e-9)


def test_lr_scales_with_the_batch_only_with_auto_scale_lr():
    """mmpretrain's DeiT config scales the lr by batch / 1024 (5e-4 per 512 images, DeiT's
    rule) only with --auto-scale-lr, and never eta_min (as DeiT's min_lr)."""
    cfg = Config.fromfile(CONFIGS[0])
    assert cfg.auto_scale_lr == dict(base_batch_size=1024)
    default = lr_curve(cfg, batch_size=64, world_size=8, epoch_length=EPOCH_LENGTH)
    assert default == pytest.approx(reference_lrs(1e-3, EPOCH_LENGTH), rel=1e-9)
    scaled = lr_curve(
        with_auto_scale_lr(cfg, True), batch_size=64, world_size=8, epoch_length=EPOCH_LENGTH)
    assert scaled == pytest.approx(reference_lrs(5e-4, EPOCH_LENGTH), rel=1e-9)
    assert scaled[0] == pytest.approx(5e-7, rel=1e-12)  # the warm-up start scales too
    assert scaled[20 * EPOCH_LENGTH] == pytest.approx(5e-4, rel=1e-12)
    assert scaled[-1] == pytest.approx(  # the floor does not
        1e-5 + (5e-4 - 1e-5) * 0.5 * (1 + math.cos(math.pi * 279 / 280)),
        rel=1e-9)


def deit_decays(name, param):
    """DeiT's weight decay (timm's optimizer factory): none for parameters with at most one
    dimension, names ending in '.bias' and the model's no_weight_decay() names (pos_embed,
    cls_token); the rest decays."""
    leaf = name.split('.', 1)[1]  # our 'backbone.' / 'head.' prefix
    return not (param.ndim <= 1 or name.endswith('.bias')
                or leaf in ('pos_embed', 'cls_token', 'dist_token'))


@pytest.mark.parametrize('path', CONFIGS, ids=osp.basename)
def test_weight_decay_groups_are_deits(path):
    cfg = Config.fromfile(path)
    cfg.model.backbone.arch = SMALL
    cfg.model.head.in_channels = SMALL['embed_dims']
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    decay = weight_decay_of(cfg, model)
    names = set()
    for name, param in model.named_parameters():
        assert decay[name] == (0.05 if deit_decays(name, param) else 0.0), name
        names.add(name.rsplit('.', 1)[1])
    assert {'cls_token', 'pos_embed'} <= names
    if cfg.model.backbone.attn_type != 'softmax':
        assert 'rho_logit' in names  # the learnable InfSA decay, one value per head
