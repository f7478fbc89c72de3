"""Every VECA config loads and builds under its own default scope, with the settings VECA's
training needs (presets, elastic training hooks, DDP with unused parameters, the teacher)."""
import glob
import importlib.util
import os.path as osp

import pytest
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.registry import HOOKS, MODELS, init_default_scope
from mmengine.runner import Runner
from recipe_harness import use_buildable_teacher
from test_linear_probe_configs import short_run

import mmlinear  # noqa: F401
from mmlinear.engine.hooks.elastic_core_budget_hook import REFERENCE_BUDGETS

# The frozen dense linear probes (VECA and its DINOv3 teacher) have their own checks:
# test_linear_probe_configs.py; the DINOv3 ImageNet probe, VECA-B's baseline, is checked below.
CONFIGS = sorted(
    p for p in glob.glob(osp.join(REPO_ROOT, 'configs', 'veca', '*.py')) +
    glob.glob(osp.join(REPO_ROOT, 'configs', 'demo', '*veca*.py'))
    if not osp.basename(p).startswith(('linear-probe_', 'dinov3-')))
DINOV3_PROBE = osp.join(REPO_ROOT, 'configs', 'veca',
                        'dinov3-vitb16_linear-probe_8xb2048-coslr-90e_in1k.py')
BASES = {
    name: osp.join(REPO_ROOT, 'configs', '_base_', 'models', f'veca-{name}.py')
    for name in ('small', 'splus', 'base', 'large')
}
WIDTHS = dict(small=384, splus=384, base=768, large=1024)


def test_veca_configs_exist():
    names = {osp.relpath(p, osp.join(REPO_ROOT, 'configs')) for p in CONFIGS}
    assert {
        'veca/veca-base_distill-stage1_6xb128-135e_obj365-256px.py',
        'veca/veca-base_distill-stage2_6xb128-50k_obj365-multires.py',
        'veca/veca-base_linear-probe_8xb2048-coslr-90e_in1k.py',
        'veca/veca-base_8xb128-coslr-100e_in1k.py',
        'veca/mask-rcnn_veca-base_simple-pyramid_1x_coco.py',
        'veca/upernet_veca-base_8xb2-160k_ade20k-512x512.py',
        'demo/veca-demo_shapes-cls.py',
        'demo/mask-rcnn_veca-demo_simple-pyramid_shapes-coco.py',
        'demo/upernet_veca-demo_shapes-ade.py',
        'demo/upernet_veca-demo-elastic_shapes-pairs.py',
        'demo/linear_veca-demo-elastic_shapes-ade.py',
        'demo/veca-demo_distill_shapes.py',
    } <= names


@pytest.mark.parametrize('name', sorted(BASES))
def test_model_bases_build_the_preset(name):
    cfg = Config.fromfile(BASES[name])
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model)
    assert model.backbone.arch_settings == model.backbone.arch_zoo[name]
    assert model.backbone.out_type == 'cls_token' and model.backbone.active_cores == 64
    assert model.head.in_channels == WIDTHS[name] == model.backbone.embed_dims


def build(cfg):
    init_default_scope(cfg.default_scope)
    return MODELS.build(cfg.model)


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: osp.relpath(p, REPO_ROOT))
def test_config_builds_model(path):
    cfg = Config.fromfile(path)
    assert cfg.default_scope in ('mmpretrain', 'mmdet', 'mmseg')
    if cfg.model.type == 'mmlinear.VECADistiller':
        check_distillation(path, cfg)
        return
    model = build(cfg)
    assert type(model.backbone).__name__ == 'VECA' and model.backbone.active_cores == 64
    if 'demo' not in path:
        assert model.backbone.arch_settings == model.backbone.arch_zoo['base']
    if cfg.default_scope == 'mmpretrain':
        assert model.backbone.out_type == 'cls_token'
        if 'linear-probe' in path:  # a frozen backbone: only the neck and head learn
            assert not any(p.requires_grad for p in model.backbone.parameters())
            assert cfg.model.backbone.init_cfg.prefix == 'student.'
        return
    # Dense configs: the stride-16 map of the last block through the simple pyramid.
    assert model.backbone.out_type == 'featmap' and model.backbone.out_indices == (
        model.backbone.num_layers - 1, )
    if 'demo' in path:
        model.eval()
        with torch.no_grad():
            feats = model.extract_feat(torch.randn(1, 3, 128, 128))
        sizes = [f.shape[-1] for f in feats]
        # The map of the patches (8 x 8 of 16 pixels), rescaled by the pyramid when there is
        # one; a linear head reads the map itself.
        scales = cfg.model.neck.scale_factors if 'neck' in cfg.model else (1.0, )
        side = 128 // cfg.model.backbone.patch_size
        assert sizes[:len(scales)] == [int(side * s) for s in scales]
        if cfg.default_scope == 'mmseg':
            logits = model._forward(torch.randn(1, 3, 128, 128))
            assert logits.shape[:2] == (1, len(cfg.classes))


def test_dinov3_imagenet_probe_is_vecas_probe_with_the_frozen_teacher_as_backbone():
    """The paper's ImageNet baseline: VECA-B's linear probe (neck, head, data, schedule) with
    the frozen DINOv3 ViT-B/16 giving its class token where VECA-B gives its global token."""
    configs = [
        Config.fromfile(p)
        for p in (DINOV3_PROBE,
                  osp.join(REPO_ROOT, 'configs', 'veca', 'veca-base_linear-probe_'
                           '8xb2048-coslr-90e_in1k.py'))
    ]
    dinov3, veca = [cfg.to_dict() for cfg in configs]
    dinov3_backbone, veca_backbone = dinov3['model'].pop('backbone'), veca['model'].pop('backbone')
    bases = Config.fromfile(osp.join(REPO_ROOT, 'configs', '_base_', 'frozen_dense_backbones.py'))
    for name in bases:  # the base's backbones, as variables
        dinov3.pop(name)
    assert dinov3 == veca
    assert veca_backbone['out_type'] == dinov3_backbone.pop('out_type') == 'cls_token'
    assert dinov3_backbone == bases.dinov3_vitb16_frozen
    assert dinov3_backbone['model_name'] == 'vit_base_patch16_dinov3.lvd1689m'
    assert dinov3_backbone['frozen'] is True


def test_dinov3_imagenet_probe_trains_the_neck_and_head_on_the_class_token():
    pytest.importorskip('timm')
    cfg = Config.fromfile(DINOV3_PROBE)
    # One block and no checkpoint (the released weights are a separate download), at the width
    # the neck and head take.
    cfg.model.backbone.checkpoint_path = None
    cfg.model.backbone.model_kwargs.update(depth=1, img_size=64)
    model = build(cfg)
    assert type(model.backbone).__name__ == 'TimmViTFeatures'
    assert not any(p.requires_grad for p in model.backbone.parameters())
    assert all(p.requires_grad for p in [*model.neck.parameters(), *model.head.parameters()])
    model.train()
    assert not model.backbone.vit.training
    images = torch.randn(2, 3, 64, 64)
    (token, ) = model.extract_feat(images, stage='backbone')
    assert token.shape == (2, 768)
    assert model(images, mode='tensor').shape == (2, 1000)


def check_distillation(path, cfg):
    hooks = [h.type for h in cfg.custom_hooks]
    assert 'mmlinear.ElasticCoreBudgetHook' in hooks
    built = [HOOKS.build(h) for h in cfg.custom_hooks]
    assert [type(h).__name__ for h in built] == [h.split('.')[1] for h in hooks]
    assert cfg.model_wrapper_cfg.find_unused_parameters is True
    assert cfg.val_cfg is None and cfg.test_cfg is None
    if 'demo' not in path:
        teacher = cfg.model.teacher
        assert teacher.type == 'mmpretrain.TIMMBackbone'
        assert teacher.model_name == 'vit_base_patch16_dinov3.lvd1689m'
        assert cfg.model.teacher_num_register_tokens == 4
        assert cfg.optim_wrapper.optimizer.type == 'AdamW'
        if 'stage2' in path:
            assert 'mmlinear.MultiResolutionHook' in hooks
            assert cfg.train_cfg.max_iters == 50000
        else:
            assert cfg.train_cfg.max_epochs == 135
        use_buildable_teacher(cfg)
    model = build(cfg)
    assert type(model.student).__name__ == 'VECA'
    assert not any(p.requires_grad for p in model.teacher.parameters())
    if 'demo' not in path and importlib.util.find_spec('timm') is not None:
        # As the reference starts: VECA-B's patch projection is a copy of the teacher's (what
        # init_weights does last; the whole init_weights runs in test_veca_e2e).
        assert model.init_patch_embed_from_teacher and model.copy_teacher_patch_embed()
        source = model.teacher.timm_model.patch_embed.proj
        assert model.teacher.timm_model.num_prefix_tokens == 1 + 4
        assert torch.equal(model.student.patch_embed.proj.weight, source.weight)
        assert torch.equal(model.student.patch_embed.proj.bias, source.bias)
        assert isinstance(model.student.output_proj, torch.nn.Identity)  # 768 both
    if 'demo' in path:
        tokens = model(torch.randn(2, 3, 64, 64), mode='tensor')
        assert tokens['patches'].shape == (2, 16, 64)


# The elastic dense demos: (config, its set of the bundled data, its classes).
ELASTIC_DENSE_DEMOS = (
    ('upernet_veca-demo-elastic_shapes-pairs.py', 'pairs', ('background', 'paired', 'single')),
    ('linear_veca-demo-elastic_shapes-ade.py', 'ade', ('background', 'circle', 'square',
                                                       'triangle')),
)


@pytest.mark.parametrize(
    'config,data,classes', ELASTIC_DENSE_DEMOS, ids=[d[1] for d in ELASTIC_DENSE_DEMOS])
def test_elastic_dense_demo_trains_the_backbone_at_drawn_budgets(config, data, classes, tiny_data,
                                                                 tmp_path):
    """3 iterations on the tiny scenes, each at a drawn budget, the backbone learning with the
    head, then validation at the full budget."""
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', 'demo', config))
    assert [h.type for h in cfg.custom_hooks] == ['mmlinear.ElasticCoreBudgetHook']
    assert cfg.model.decode_head.num_classes == len(classes)
    short_run(cfg, osp.join(tiny_data, data), str(tmp_path / 'work'))
    torch.manual_seed(0)
    runner = Runner.from_cfg(cfg)
    assert runner.train_dataloader.dataset.metainfo['classes'] == classes
    backbone = runner.model.backbone
    assert all(p.requires_grad for p in backbone.parameters())
    before = {k: v.detach().clone() for k, v in backbone.named_parameters()}
    runner.train()
    drawn = runner.message_hub.get_scalar('train/active_cores').data[0]
    assert len(drawn) == 3 and set(drawn) <= set(REFERENCE_BUDGETS)
    assert backbone.active_cores == 64  # left at the evaluation budget
    # Trained end to end: the patch embedding and the first core chunk (active at every
    # budget) moved.
    for name in ('patch_embed.proj.weight', 'query_token_chunks.0'):
        assert not torch.equal(dict(backbone.named_parameters())[name], before[name]), name
    metrics = runner.val_loop.run()
    assert 0 <= metrics['mIoU'] <= 100
