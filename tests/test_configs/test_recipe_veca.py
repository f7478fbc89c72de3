"""VECA's distillation configs run the reference's learning-rate schedule, batch rule, weight
decay and precision (alansong1322/VECA: veca/config.py, veca/schedules.py, veca/optim.py,
veca/train_pretrain.py, veca/train_multires_finetune.py), written out here; the linear probe
runs mmpretrain's MAE linear-probe optimizer wrapper."""
import math
import os.path as osp

import pytest
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODELS, init_default_scope
from recipe_harness import lr_curve, use_buildable_teacher, weight_decay_of, with_auto_scale_lr

import mmlinear  # noqa: F401

VECA = osp.join(REPO_ROOT, 'configs', 'veca')
STAGE1 = osp.join(VECA, 'veca-base_distill-stage1_6xb128-135e_obj365-256px.py')
STAGE2 = osp.join(VECA, 'veca-base_distill-stage2_6xb128-50k_obj365-multires.py')
PROBE = osp.join(VECA, 'veca-base_linear-probe_8xb2048-coslr-90e_in1k.py')
EPOCH_LENGTH = 2


def reference_lrs(lr, lr_min, warmup_steps, total_steps):
    """get_cosine_schedule_with_warmup (a LambdaLR, stepped after every optimizer step, so
    step i runs with lr * lr_lambda(i)); the lr is fixed whatever the batch."""
    ratio = lr_min / lr
    lrs = []
    for step in range(total_steps):
        if step < warmup_steps:
            factor = ratio + (1 - ratio) * step / max(1, warmup_steps)
        else:
            progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
            factor = ratio + (1 - ratio) * max(0.0, 0.5 * (1 + math.cos(math.pi * progress)))
        lrs.append(lr * factor)
    return lrs


def check_points(ours, lr, lr_min, warmup, total):
    assert ours[0] == pytest.approx(lr_min, rel=1e-12)  # first step: the warm-up starts at lr_min
    assert ours[warmup - 1] == pytest.approx(  # last warm-up step
        lr_min + (lr - lr_min) * (warmup - 1) / warmup, rel=1e-12)
    assert ours[warmup] == pytest.approx(lr, rel=1e-12)  # the cosine starts at the peak
    middle = warmup + (total - warmup) // 2
    assert ours[middle] == pytest.approx((lr + lr_min) / 2, rel=1e-9)
    assert ours[-1] == pytest.approx(  # last step: one cosine step above lr_min
        lr_min + (lr - lr_min) * 0.5 * (1 + math.cos(math.pi * (total - warmup - 1) /
                                                     (total - warmup))),
        rel=1e-9)


@pytest.mark.parametrize('gpus,per_gpu', [(6, 128), (2, 64)], ids=['768', '128'])
def test_stage1_lr_is_the_references_at_any_batch(gpus, per_gpu):
    cfg = Config.fromfile(STAGE1)
    ours = lr_curve(cfg, batch_size=per_gpu, world_size=gpus, epoch_length=EPOCH_LENGTH)
    warmup, total = 25 * EPOCH_LENGTH, 135 * EPOCH_LENGTH
    assert ours == pytest.approx(reference_lrs(4e-4, 5e-5, warmup, total), rel=1e-9, abs=0)
    check_points(ours, 4e-4, 5e-5, warmup, total)


def test_stage2_lr_is_the_references():
    cfg = Config.fromfile(STAGE2)
    ours = lr_curve(cfg, batch_size=64, world_size=2, epoch_length=1)
    assert len(ours) == 50000
    assert ours == pytest.approx(reference_lrs(8e-5, 3e-5, 7000, 50000), rel=1e-9, abs=0)
    check_points(ours, 8e-5, 3e-5, 7000, 50000)


def test_opt_in_auto_scale_lr_scales_the_whole_curve():
    """The reference fixes the lr; with --auto-scale-lr (ours, off by default) the peak, the
    warm-up start and the floor all follow batch / 768."""
    cfg = with_auto_scale_lr(Config.fromfile(STAGE1), True)
    ours = lr_curve(cfg, batch_size=64, world_size=6, epoch_length=EPOCH_LENGTH)
    reference = reference_lrs(4e-4 / 2, 5e-5 / 2, 25 * EPOCH_LENGTH, 135 * EPOCH_LENGTH)
    assert ours == pytest.approx(reference, rel=1e-9, abs=0)


def build_distiller(path):
    cfg = Config.fromfile(path)
    use_buildable_teacher(cfg)
    init_default_scope(cfg.default_scope)
    return cfg, MODELS.build(cfg.model)


@pytest.mark.parametrize(
    'path,weight_decay', [(STAGE1, 0.015), (STAGE2, 0.01)], ids=['stage1', 'stage2'])
def test_every_student_parameter_decays_as_in_the_reference(path, weight_decay):
    """The reference's AdamW (and NorMuon) decay every student parameter: norms, biases, the
    core bank (query_token_chunks, qcoord_chunks) and pos_alpha included."""
    cfg, model = build_distiller(path)
    decay = weight_decay_of(cfg, model)
    student = [name for name in decay if name.startswith('student.')]
    assert any('query_token_chunks' in n for n in student)
    assert any('qcoord_chunks' in n for n in student)
    assert 'student.pos_alpha' in student and 'student.final_norm.bias' in student
    for name in student:
        assert decay[name] == weight_decay, name
    # The teacher is frozen: it never gets a gradient, so its groups never update it.
    assert not any(p.requires_grad for p in model.teacher.parameters())
    assert cfg.model.init_patch_embed_from_teacher is True


@pytest.mark.parametrize('name', [
    'veca-base_8xb128-coslr-100e_in1k.py', 'mask-rcnn_veca-base_simple-pyramid_1x_coco.py',
    'upernet_veca-base_8xb2-160k_ade20k-512x512.py', '../demo/veca-demo_shapes-cls.py',
    '../demo/mask-rcnn_veca-demo_simple-pyramid_shapes-coco.py',
    '../demo/upernet_veca-demo_shapes-ade.py'
])
def test_downstream_configs_decay_the_core_bank(name):
    cfg = Config.fromfile(osp.join(VECA, name))
    init_default_scope(cfg.default_scope)
    decay = weight_decay_of(cfg, MODELS.build(cfg.model))
    bank = [n for n in decay if 'query_token_chunks' in n or 'qcoord_chunks' in n]
    assert len(bank) == 16
    assert all(decay[n] == cfg.optim_wrapper.optimizer.weight_decay > 0 for n in bank)


def test_distillation_runs_plain_bf16_autocast_without_a_loss_scaler(monkeypatch):
    cfg = Config.fromfile(STAGE1)
    wrapper_cfg = cfg.optim_wrapper
    assert wrapper_cfg.type == 'AmpOptimWrapper' and wrapper_cfg.dtype == 'bfloat16'
    assert 'clip_grad' not in wrapper_cfg  # the reference does not clip either
    assert Config.fromfile(STAGE2).optim_wrapper.loss_scale == dict(enabled=False)
    # AmpOptimWrapper asserts an accelerator; its scaler and autocast work on the CPU.
    import mmengine.optim.optimizer.amp_optimizer_wrapper as amp_module
    monkeypatch.setattr(amp_module, 'is_cuda_available', lambda: True)
    model = torch.nn.Linear(4, 1, bias=False)
    wrapper = build_optim_wrapper(model, wrapper_cfg)
    assert not wrapper.loss_scaler.is_enabled()
    x = torch.ones(2, 4)
    with wrapper.optim_context(model):
        y = model(x)
    assert y.dtype == torch.bfloat16  # bf16 autocast
    weight = model.weight.detach().clone()
    loss = y.float().sum()
    loss.backward()
    # The gradient is the loss's own (no scale factor), and the step is taken.
    assert torch.allclose(model.weight.grad, x.sum(0, keepdim=True), rtol=1e-2)
    wrapper.step()
    assert not torch.equal(model.weight, weight)
    assert 'scale' not in wrapper.state_dict().get('loss_scaler', {})


def test_linear_probe_uses_the_mae_linear_probe_optimizer_wrapper():
    ours = Config.fromfile(PROBE)
    import mmpretrain
    mae = Config.fromfile(
        osp.join(
            osp.dirname(mmpretrain.__file__), '.mim', 'configs', 'mae', 'benchmarks',
            'vit-base-p16_8xb2048-linear-coslr-90e_in1k.py'))
    assert ours.optim_wrapper == mae.optim_wrapper  # AmpOptimWrapper (fp16, dynamic scale)
    assert ours.optim_wrapper.type == 'AmpOptimWrapper'
    assert ours.param_scheduler == mae.param_scheduler
    assert ours.train_dataloader.batch_size == mae.train_dataloader.batch_size == 2048
