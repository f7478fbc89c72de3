"""VECADistiller: frozen teacher, teacher targets, loss wiring, checkpoint loading, errors."""
import pytest
import torch
from mmengine.registry import init_default_scope

from mmlinear.models import VECADistillLoss
from mmlinear.registry import MODELS

STUDENT = dict(type='mmlinear.VECA', arch='test')  # D = 64


def vit_teacher(**kwargs):
    """A tiny random mmpretrain ViT, 16-px patches, D = 48, all tokens after the final norm."""
    cfg = dict(
        type='mmpretrain.VisionTransformer',
        arch=dict(embed_dims=48, num_layers=2, num_heads=3, feedforward_channels=96),
        img_size=64,
        patch_size=16,
        out_type='raw')
    cfg.update(kwargs)
    return cfg


def build(teacher=None, student=STUDENT, **kwargs):
    init_default_scope('mmpretrain')  # as the runner does: nested builds must still resolve
    model = MODELS.build(
        dict(
            type='mmlinear.VECADistiller',
            student=dict(student),
            teacher=teacher or vit_teacher(),
            **kwargs))
    model.init_weights()
    return model


def images(batch=2, size=64, seed=0):
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))


def test_teacher_is_frozen_and_stays_in_eval_mode():
    model = build()
    model.train()
    assert model.student.training and not model.teacher.training
    assert not any(m.training for m in model.teacher.modules())
    losses = model(images(), mode='loss')
    sum(losses.values()).backward()
    assert all(p.grad is None and not p.requires_grad for p in model.teacher.parameters())
    assert model.student.patch_embed.proj.weight.grad.abs().sum() > 0


def test_student_projects_to_the_teacher_width():
    model = build()
    assert model.student.out_channels == 48
    tokens = model(images(), mode='tensor')
    assert tokens['global'].shape == (2, 48) and tokens['patches'].shape == (2, 16, 48)
    assert tuple(tokens['hw_shape']) == (4, 4)
    same_width = build(
        teacher=vit_teacher(
            arch=dict(embed_dims=64, num_layers=1, num_heads=2, feedforward_channels=64)))
    assert isinstance(same_width.student.output_proj, torch.nn.Identity)


@pytest.mark.parametrize('registers', [0, 2])
def test_targets_are_final_normed_cls_and_patches_without_registers(registers):
    model = build(teacher_num_register_tokens=registers)
    x = images()
    tokens = model.teacher(x)[-1]  # (B, 1 + 16, 48), after ln1
    assert tokens.shape == (2, 17, 48)
    # Final LayerNorm (identity affine at init): zero mean per token.
    assert tokens.mean(-1).abs().max() < 1e-5
    cls, patches = model.teacher_targets(x)
    torch.testing.assert_close(cls, tokens[:, 0])
    torch.testing.assert_close(patches, tokens[:, 1 + registers:])


def test_loss_is_the_reference_loss_of_student_and_teacher_tokens():
    model = build(loss=dict(type='mmlinear.VECADistillLoss', dense_weight=0.5))
    model.eval()  # no RoPE augmentation, so two student forwards agree
    x = images(seed=1)
    losses = model(x, mode='loss')
    student = model(x, mode='tensor')
    cls, patches = model.teacher_targets(x)
    expected = VECADistillLoss(dense_weight=0.5)(student['global'], student['patches'], cls,
                                                 patches)
    for key, value in expected.items():
        torch.testing.assert_close(losses[key], value)


def test_student_budget_changes_the_loss():
    model = build()
    model.eval()
    x = images(seed=2)
    model.student.active_cores = 8
    low = model(x, mode='loss')['loss_global']
    model.student.active_cores = 64
    full = model(x, mode='loss')['loss_global']
    assert not torch.allclose(low, full)


def test_mismatched_patch_grids_are_rejected():
    model = build(teacher=vit_teacher(patch_size=8))
    with pytest.raises(ValueError, match='teacher gives 64 patch tokens .* grid 4x4 has 16'):
        model(images(), mode='loss')


@pytest.mark.parametrize('kwargs,message', [
    (dict(out_type='cls_token'), "out_type='raw'"),
    (dict(final_norm=False), 'final_norm=True'),
    (dict(out_indices=0), 'out_indices=-1'),
])
def test_teacher_settings_that_miss_the_targets_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build(teacher=vit_teacher(**kwargs))


def test_predict_and_unknown_modes_raise():
    model = build()
    with pytest.raises(ValueError, match='no predictions'):
        model(images(), mode='predict')
    with pytest.raises(ValueError, match="allowed: 'loss', 'tensor'"):
        model(images(), mode='features')
    with pytest.raises(ValueError, match='teacher_num_register_tokens'):
        build(teacher_num_register_tokens=-1)


def test_teacher_checkpoint_is_loaded_with_prefixes_stripped(tmp_path):
    source = MODELS.build(vit_teacher())
    with torch.no_grad():
        for param in source.parameters():
            param.uniform_(-1, 1)
    # A classifier checkpoint: 'backbone.' prefix and an extra head the teacher lacks.
    state = {f'backbone.{k}': v for k, v in source.state_dict().items()}
    state['head.fc.weight'] = torch.zeros(3, 48)
    path = str(tmp_path / 'teacher.pth')
    torch.save(dict(state_dict=state), path)
    model = build(teacher_ckpt=path)
    for key, value in source.state_dict().items():
        torch.testing.assert_close(model.teacher.state_dict()[key], value)
    del state['backbone.ln1.weight']
    torch.save(dict(state_dict=state), path)
    with pytest.raises(KeyError, match='lacks 1 teacher weights'):
        build(teacher_ckpt=path)


def test_student_width_must_match_the_teacher():
    with pytest.raises(ValueError, match='student outputs 32 channels but the teacher 48'):
        build(student=dict(STUDENT, out_channels=32))


def test_patch_embed_is_copied_from_the_teacher_when_the_shapes_match(mmengine_log):
    # A 64-wide teacher with 16-px patches: its patch projection has the student's shape.
    teacher = vit_teacher(
        arch=dict(embed_dims=64, num_layers=1, num_heads=2, feedforward_channels=64))
    model = build(teacher=teacher, init_patch_embed_from_teacher=True)
    lines = list(mmengine_log)
    source = model.teacher.patch_embed.projection
    target = model.student.patch_embed.proj
    assert torch.equal(target.weight, source.weight)
    assert torch.equal(target.bias, source.bias)
    # A copy, not a shared tensor: the student trains, the teacher stays frozen.
    assert target.weight.data_ptr() != source.weight.data_ptr() and target.weight.requires_grad
    copied = [line for line in lines if 'init_patch_embed_from_teacher: copied' in line]
    assert copied == [
        'init_patch_embed_from_teacher: copied teacher.patch_embed.projection '
        '(weight (64, 3, 16, 16)) into student.patch_embed.proj'
    ]
    # Off (the default): the student keeps its own random initialisation.
    plain = build(teacher=teacher)
    assert not torch.equal(plain.student.patch_embed.proj.weight,
                           plain.teacher.patch_embed.projection.weight)


def test_patch_embed_copy_is_skipped_and_logged_when_the_widths_differ(mmengine_log):
    torch.manual_seed(0)
    reference = build()  # the 48-wide teacher, student D = 64
    torch.manual_seed(0)
    model = build(init_patch_embed_from_teacher=True)
    lines = list(mmengine_log)
    # Same seed, same initialisation: the skip left the student's projection untouched.
    assert torch.equal(model.student.patch_embed.proj.weight,
                       reference.student.patch_embed.proj.weight)
    skipped = [line for line in lines if 'init_patch_embed_from_teacher: skipped' in line]
    assert len(skipped) == 1
    assert '(48, 3, 16, 16)' in skipped[0] and '(64, 3, 16, 16)' in skipped[0]
    assert not any('init_patch_embed_from_teacher: copied' in line for line in lines)


def test_patch_embed_copy_of_a_bias_free_teacher_zeroes_the_bias():
    teacher = vit_teacher(
        arch=dict(embed_dims=64, num_layers=1, num_heads=2, feedforward_channels=64))
    model = build(teacher=teacher)
    projection = model.teacher.patch_embed.projection
    bias_free = torch.nn.Conv2d(3, 64, 16, 16, bias=False)
    bias_free.weight.data.copy_(projection.weight)
    model.teacher.patch_embed.projection = bias_free
    torch.nn.init.normal_(model.student.patch_embed.proj.bias)
    assert model.copy_teacher_patch_embed()
    assert torch.equal(model.student.patch_embed.proj.weight, bias_free.weight)
    assert torch.count_nonzero(model.student.patch_embed.proj.bias) == 0


def test_patch_embed_copy_needs_a_teacher_patch_projection():
    with pytest.raises(ValueError, match='no Conv2d patch projection'):
        build(
            teacher=dict(type='mmpretrain.ResNet', depth=18),
            teacher_dims=512,
            init_patch_embed_from_teacher=True)
    with pytest.raises(TypeError, match='must be True or False'):
        build(init_patch_embed_from_teacher='yes')


def dinov3_teacher(embed_dim=64):
    """timm's DINOv3 ViT (RoPE, layer scale, CLS + 4 registers) through mmpretrain's
    TIMMBackbone, shrunk to 2 blocks of ``embed_dim`` at 64 px, random weights."""
    return dict(
        type='mmpretrain.TIMMBackbone',
        model_name='vit_base_patch16_dinov3',
        pretrained=False,
        embed_dim=embed_dim,
        depth=2,
        num_heads=2,
        img_size=64)


@pytest.mark.parametrize('embed_dim,copied', [(64, True), (48, False)])
def test_timm_dinov3_teacher_targets_and_patch_embed_start(embed_dim, copied, mmengine_log):
    torch.manual_seed(0)
    model = build(
        teacher=dinov3_teacher(embed_dim),
        teacher_num_register_tokens=4,
        init_patch_embed_from_teacher=True)
    source = model.teacher.timm_model.patch_embed.proj
    target = model.student.patch_embed.proj
    assert torch.equal(target.weight, source.weight) is copied
    assert torch.equal(target.bias, source.bias) is copied
    lines = [line for line in mmengine_log if line.startswith('init_patch_embed_from_teacher')]
    if copied:
        assert lines == [
            'init_patch_embed_from_teacher: copied teacher.timm_model.patch_embed.proj '
            '(weight (64, 3, 16, 16)) into student.patch_embed.proj'
        ]
    else:
        assert len(lines) == 1 and lines[0].startswith('init_patch_embed_from_teacher: skipped')
        assert '(48, 3, 16, 16)' in lines[0] and '(64, 3, 16, 16)' in lines[0]
    # The targets: timm's final-normed tokens, CLS first, the 4 registers dropped.
    x = images()
    tokens = model.teacher.timm_model.forward_features(x)
    assert tokens.shape == (2, 1 + 4 + 16, embed_dim)
    cls, patches = model.teacher_targets(x)
    torch.testing.assert_close(cls, tokens[:, 0])
    torch.testing.assert_close(patches, tokens[:, 5:])
    losses = model(x, mode='loss')
    sum(losses.values()).backward()
    assert all(torch.isfinite(v) for v in losses.values())
    assert all(p.grad is None for p in model.teacher.parameters())
