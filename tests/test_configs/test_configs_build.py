"""Every config under configs/ loads and builds its model under its own default scope."""
import glob
import os.path as osp

import mmpretrain
import pytest
import torch
from conftest import REPO_ROOT
from demo_training import train_demo_briefly
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope

from mmlinear.models.layers import ATTN_TYPES

# VECA configs (a distiller among them) are checked in test_veca_configs.py, and the frozen
# linear probes of configs/veca/ (VECA and its DINOv3 teacher) in test_linear_probe_configs.py.
CONFIGS = sorted(
    p for p in glob.glob(osp.join(REPO_ROOT, 'configs', '**', '*.py'), recursive=True) if
    '_base_' not in p and 'veca' not in osp.basename(p) and osp.basename(osp.dirname(p)) != 'veca')


def test_configs_exist():
    names = {osp.relpath(p, osp.join(REPO_ROOT, 'configs')) for p in CONFIGS}
    for variant in ('linear', 'pure', 'softmax'):
        assert f'infvit/infvit-4l-{variant}_16xb64_in1k.py' in names
        assert f'infvit/mask-rcnn_infvit-4l-{variant}_simple-pyramid_1x_coco.py' in names
        assert f'infvit/upernet_infvit-4l-{variant}_8xb2-160k_ade20k-512x512.py' in names
    assert sum(n.startswith('demo/') for n in names) >= 3
    # The attention-quality comparison trains every attention type under the Linear demo's
    # recipe.
    for variant in ('linear', 'pure', 'softmax', 'none'):
        assert f'demo/infvit-demo-{variant}_shapes-cls.py' in names
    for arch in ('t', 's', 'b'):
        assert any(
            n.startswith(f'weightformer/weightformer-{arch}_') and n.endswith('_in1k.py')
            or n.startswith(f'weightformer/weightformer-{arch}_') and n.endswith('_in1k-448px.py')
            for n in names), arch
    assert 'weightformer/mask-rcnn_deit-t_simple-pyramid_1x_coco.py' in names
    # The WeightFormer paper's ImageNet baselines, and the ConvNeXt one at demo scale.
    assert 'weightformer/deit-s_8xb128_in1k.py' in names
    assert 'weightformer/convnext-s-isotropic_8xb128-accum4_in1k.py' in names
    assert 'demo/convnext-demo_shapes-cls.py' in names
    assert 'weightformer/upernet_deit-s_8xb2-160k_ade20k-512x512.py' in names
    for arch in ('t', 's'):
        assert f'weightformer/mask-rcnn_weightformer-{arch}_simple-pyramid_1x_coco.py' in names
        assert f'weightformer/upernet_weightformer-{arch}_8xb2-160k_ade20k-512x512.py' in names
    for name in ('weightformer-demo_shapes-cls.py',
                 'mask-rcnn_weightformer-demo_simple-pyramid_shapes-coco.py',
                 'upernet_weightformer-demo_shapes-ade.py',
                 'mask-rcnn_deit-demo_simple-pyramid_shapes-coco.py',
                 'upernet_deit-demo_shapes-ade.py'):
        assert f'demo/{name}' in names


@pytest.mark.parametrize(
    'variant',
    ('pure', 'softmax', 'none', 'elu-linear', 'performer', 'linformer', 'nystromformer', 'agent'))
def test_demo_attention_variants_differ_from_the_linear_demo_in_attn_type_only(variant):
    """The attention-quality and efficient-attention comparisons train every attention type
    under the Linear demo's recipe (the baselines add their own options)."""
    demo = osp.join(REPO_ROOT, 'configs', 'demo', 'infvit-demo-{}_shapes-cls.py')
    linear = Config.fromfile(demo.format('linear')).to_dict()
    other = Config.fromfile(demo.format(variant)).to_dict()
    assert linear['model']['backbone'].pop('attn_type') == 'linear'
    assert other['model']['backbone'].pop('attn_type') == variant.replace('-', '_')
    other['model']['backbone'].pop('mixer_cfg', None)
    assert other == linear


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: osp.relpath(p, REPO_ROOT))
def test_config_builds_model(path):
    cfg = Config.fromfile(path)
    scope = cfg.default_scope
    assert scope in ('mmpretrain', 'mmdet', 'mmseg')
    init_default_scope(scope)
    model = MODELS.build(cfg.model)
    backbone = model.backbone
    if 'weightformer' in osp.basename(path):
        check_weightformer(path, cfg, backbone)
        return
    if '_deit-' in osp.basename(path) or osp.basename(path).startswith('deit-'):
        assert type(backbone).__name__ == 'VisionTransformer'
        return
    if osp.basename(path).startswith('convnext-'):
        # Isotropic: the patchify stem, then one stage at one width, no downsampling.
        assert type(backbone).__name__ == 'ConvNeXt'
        assert len(backbone.stages) == len(backbone.downsample_layers) == 1
        return
    assert type(backbone).__name__ == 'InfViT'
    # The attention type is named before the first '_' ('infvit-demo-elu-linear_...').
    named = [t for t in ATTN_TYPES if f'-{t.replace("_", "-")}_' in osp.basename(path)]
    assert backbone.attn_type == max(named, key=len)


def check_weightformer(path, cfg, backbone):
    """WeightFormer configs: the backbone class, its arch, and the reference weight-decay
    groups (the reference's rule: no decay on 1-D parameters such as the dynamic `.b`)."""
    from mmlinear.models import WeightFormer
    assert type(backbone).__name__ == 'WeightFormer'
    name = osp.basename(path)
    arch = cfg.model.backbone.arch
    demo_prefixes = ('weightformer-demo', 'mask-rcnn_weightformer-demo',
                     'upernet_weightformer-demo')
    if name.startswith(demo_prefixes):
        assert isinstance(arch, dict)
        assert backbone.arch_settings == dict(arch)
    else:
        variant = name.split('weightformer-')[1][0]
        assert arch == variant
        assert backbone.arch_settings == WeightFormer.arch_zoo[variant]
    paramwise = cfg.optim_wrapper.paramwise_cfg
    assert paramwise.get('flat_decay_mult') == 0.0
    assert paramwise.get('norm_decay_mult') == 0.0
    assert paramwise.get('bias_decay_mult') == 0.0
    # No custom key may match every parameter by accident (e.g. '.b' in 'backbone.blocks').
    for key in paramwise.get('custom_keys', {}):
        assert key not in 'backbone.blocks.0.linear1.weight', key


MMPRETRAIN_CONFIGS = osp.join(osp.dirname(mmpretrain.__file__), '.mim', 'configs')


def unscoped(value):
    """A config's dict without the '_scope_' keys that inheriting through 'mmpretrain::'
    adds."""
    if isinstance(value, dict):
        return {k: unscoped(v) for k, v in value.items() if k != '_scope_'}
    if isinstance(value, (list, tuple)):
        return type(value)(unscoped(v) for v in value)
    return value


def test_deit_s_baseline_is_mmpretrains_recipe_on_8_gpus():
    """The WeightFormer paper's DeiT-S (79.8): mmpretrain's DeiT-S config, its total batch of
    1024 split over 8 GPUs instead of 4."""
    ours = Config.fromfile(osp.join(REPO_ROOT, 'configs/weightformer/deit-s_8xb128_in1k.py'))
    theirs = Config.fromfile(osp.join(MMPRETRAIN_CONFIGS, 'deit/deit-small_4xb256_in1k.py'))
    assert ours.train_dataloader.batch_size * 8 == theirs.train_dataloader.batch_size * 4 == 1024
    ours.train_dataloader.batch_size = theirs.train_dataloader.batch_size
    assert unscoped(ours.to_dict()) == unscoped(theirs.to_dict())


def test_isotropic_convnext_s_baseline_is_the_reference_model_in_mmpretrains_recipe():
    """The WeightFormer paper's ConvNeXt-S (79.7) is the isotropic one: 18 blocks 384 wide
    after a 16x16 patchify stem, about 22M parameters with the head; mmpretrain's ConvNeXt-S
    recipe with the reference's isotropic settings (drop path 0.1, no layer scale, 50 warm-up
    epochs, 4096 images per step, weights averaged once per step)."""
    path = osp.join(REPO_ROOT, 'configs/weightformer/convnext-s-isotropic_8xb128-accum4_in1k.py')
    ours = Config.fromfile(path)
    theirs = Config.fromfile(
        osp.join(MMPRETRAIN_CONFIGS, 'convnext/convnext-small_32xb128_in1k.py'))
    init_default_scope('mmpretrain')
    model = MODELS.build(ours.model)
    (stage, ) = model.backbone.stages
    assert len(stage) == 18 and model.backbone.channels == [384]
    assert model.backbone.downsample_layers[0][0].stride == (16, 16)
    assert all(block.gamma is None for block in stage)  # no layer scale
    assert stage[-1].drop_path.drop_prob == pytest.approx(0.1)
    assert round(sum(p.numel() for p in model.parameters()) / 1e6) == 22
    accumulation = ours.optim_wrapper.pop('accumulative_counts')
    assert ours.train_dataloader.batch_size * 8 * accumulation == 4096
    assert ours.optim_wrapper.optimizer.lr == 4e-3
    (ema, ) = ours.pop('custom_hooks')
    assert ema.type == 'EMAHook' and ema.interval == accumulation and ema.momentum == 1e-4
    warmup, cosine = ours.pop('param_scheduler')
    assert warmup.end == cosine.begin == ours.pop('warmup_epochs') == 50
    ours, theirs = unscoped(ours.to_dict()), unscoped(theirs.to_dict())
    for cfg in (ours, theirs):
        cfg.pop('param_scheduler', None), cfg.pop('custom_hooks', None)
        cfg['model'].pop('backbone'), cfg['model']['head'].pop('in_channels')
    assert ours == theirs


@pytest.mark.parametrize('baseline, twin', [
    ('weightformer/mask-rcnn_deit-t_simple-pyramid_1x_coco.py',
     'weightformer/mask-rcnn_weightformer-t_simple-pyramid_1x_coco.py'),
    ('weightformer/upernet_deit-s_8xb2-160k_ade20k-512x512.py',
     'weightformer/upernet_weightformer-s_8xb2-160k_ade20k-512x512.py'),
    ('demo/mask-rcnn_deit-demo_simple-pyramid_shapes-coco.py',
     'demo/mask-rcnn_weightformer-demo_simple-pyramid_shapes-coco.py'),
    ('demo/upernet_deit-demo_shapes-ade.py', 'demo/upernet_weightformer-demo_shapes-ade.py'),
])
def test_deit_baselines_differ_from_weightformer_only_in_the_backbone(baseline, twin):
    """The WeightFormer paper compares with DeiT under the same neck and schedule, and so do
    the demos: apart from the backbone, its weight-decay groups and the imports it needs, the
    configs are equal; the widths match (the papers' DeiT-T / -S; at demo scale the
    WeightFormer demo's width, depth and MLP width), and so do the drop path, the patch size,
    the last map as output and the initialisation (the demos: both from scratch)."""
    configs = [
        Config.fromfile(osp.join(REPO_ROOT, 'configs', name)).to_dict() for name in (baseline, twin)
    ]
    backbones = [cfg['model'].pop('backbone') for cfg in configs]
    deit_variables = Config.fromfile(osp.join(REPO_ROOT, 'configs/_base_/deit_variables.py'))
    for cfg in configs:
        cfg['optim_wrapper'].pop('paramwise_cfg')
        cfg.pop('custom_imports')
        for name in deit_variables:  # the baseline's shared settings, as variables
            cfg.pop(name, None)
    assert configs[0] == configs[1]
    deit, weightformer = backbones
    assert deit['type'] == 'mmpretrain.VisionTransformer'
    if isinstance(weightformer['arch'], str):
        assert deit['arch'] == {'t': 'deit-tiny', 's': 'deit-small'}[weightformer['arch']]
    else:
        assert {key: deit['arch'][key] for key in weightformer['arch']} == weightformer['arch']
        assert 'num_heads' in deit['arch']
    for key in ('drop_path_rate', 'init_cfg'):
        assert deit.get(key) == weightformer.get(key), key
    assert deit['patch_size'] == weightformer['patch_size'] == 16
    assert deit['out_type'] == weightformer['out_type'] == 'featmap'
    assert deit['out_indices'] == -1 and weightformer['out_indices'] == (-1, )  # the last map


@pytest.mark.parametrize('config, data', [
    ('mask-rcnn_deit-demo_simple-pyramid_shapes-coco.py', 'coco/'),
    ('upernet_deit-demo_shapes-ade.py', 'ade'),
])
def test_deit_demo_baselines_train_on_the_demo_data(config, data, tiny_data, tmp_path):
    """Two iterations of each DeiT demo baseline on the tiny sets: mmpretrain's ViT feeds the
    WeightFormer demo's neck and heads, and the loss and weights stay finite."""
    runner = train_demo_briefly(config, osp.join(tiny_data, data), str(tmp_path))
    assert runner.iter == 2
    assert type(runner.model.backbone).__name__ == 'VisionTransformer'
    assert torch.isfinite(torch.tensor(runner.message_hub.get_scalar('train/loss').current()))
    for name, param in runner.model.named_parameters():
        assert torch.isfinite(param).all(), name


def test_convnext_demo_classifier_trains_on_the_demo_data(tiny_data, tmp_path):
    """Two iterations of the isotropic ConvNeXt demo on the tiny shapes: its one stage feeds
    the demo head, and the loss and weights stay finite."""
    runner = train_demo_briefly('convnext-demo_shapes-cls.py', osp.join(tiny_data, 'cls'),
                                str(tmp_path))
    assert runner.iter == 2
    assert type(runner.model.backbone).__name__ == 'ConvNeXt'
    assert torch.isfinite(torch.tensor(runner.message_hub.get_scalar('train/loss').current()))
    for name, param in runner.model.named_parameters():
        assert torch.isfinite(param).all(), name


def test_dense_vit_demo_differs_from_the_veca_demo_only_in_the_backbone():
    """The resolution sweep's dense ViT beside VECA: the VECA segmentation demo's config with
    a softmax InfViT of VECA's width, depth, heads, MLP width and patch size, whose maps fit
    the same simple pyramid (strides 4 to 32 of a 128 px image)."""
    names = ('upernet_infvit-demo-softmax_shapes-ade.py', 'upernet_veca-demo_shapes-ade.py')
    configs = [
        Config.fromfile(osp.join(REPO_ROOT, 'configs', 'demo', name)).to_dict() for name in names
    ]
    vit, veca = [cfg['model'].pop('backbone') for cfg in configs]
    assert configs[0] == configs[1]
    assert vit['type'] == 'mmlinear.InfViT' and vit['attn_type'] == 'softmax'
    assert veca['type'] == 'mmlinear.VECA'
    assert vit['arch'] == veca['arch'] == configs[1]['veca_demo_arch']
    for key in ('patch_size', 'out_type', 'out_indices'):
        assert vit[key] == veca[key], key
    assert 'init_cfg' not in vit and 'init_cfg' not in veca  # both from scratch
    init_default_scope('mmseg')
    model = MODELS.build(Config.fromfile(osp.join(REPO_ROOT, 'configs', 'demo', names[0])).model)
    model.eval()
    with torch.no_grad():
        sizes = [f.shape[-1] for f in model.extract_feat(torch.randn(1, 3, 128, 128))]
    assert sizes == [32, 16, 8, 4]
