import pytest
import torch

from mmlinear.apis import (BACKBONE_PRESETS, IMAGENET_MEAN, backbone_config, build_backbone,
                           build_classifier, input_normalization)
from mmlinear.models import VECA, InfViT, WeightFormer

DEMO_CLS = 'configs/demo/infvit-demo-linear_shapes-cls.py'


def test_presets_and_configs_build_the_named_backbones():
    assert type(build_backbone('infvit-test-pure')).__name__ == 'InfViT'
    assert build_backbone('infvit-test-pure').attn_type == 'pure'
    vit = build_backbone('vit-test-sdpa')
    assert type(vit).__name__ == 'VisionTransformer' and vit.embed_dims == 32
    cfg, scope = backbone_config(DEMO_CLS)
    assert cfg['type'] == 'mmlinear.InfViT' and cfg['arch'] == 'infvit-demo'
    assert scope == 'mmpretrain'
    assert build_backbone(DEMO_CLS, dict(attn_type='softmax')).attn_type == 'softmax'
    with pytest.raises(ValueError, match="unknown model 'nope'.*infvit-4l-linear"):
        backbone_config('nope')


def test_presets_name_their_backbones_arch_zoo_entries():
    """A preset refers to an ``arch_zoo`` entry by name and never restates one, so it
    cannot drift from the backbone's table (the softmax baselines copy InfViT's)."""
    zoos = {f'mmlinear.{cls.__name__}': cls.arch_zoo for cls in (InfViT, WeightFormer, VECA)}
    for name, preset in BACKBONE_PRESETS.items():
        if preset['type'] in zoos:
            assert preset['arch'] in zoos[preset['type']], name
    assert BACKBONE_PRESETS['vit-4l-sdpa']['arch'] == InfViT.arch_zoo['infvit-4l']
    assert BACKBONE_PRESETS['vit-test-sdpa']['arch'] == InfViT.arch_zoo['infvit-test']
    # weightformer-test is the backbone's own 'test' architecture, 2 blocks wide 32.
    test = build_backbone('weightformer-test')
    assert test.arch_settings == WeightFormer.arch_zoo['test']
    assert (test.embed_dims, test.num_layers) == (32, 2)


def test_whole_model_checkpoints_load_their_backbone(tmp_path):
    source = build_backbone('infvit-test-linear')
    state = {f'backbone.{k}': v for k, v in source.state_dict().items()}
    state['head.fc.weight'] = torch.zeros(3, 32)
    torch.save(dict(state_dict=state), tmp_path / 'model.pth')
    loaded = build_backbone('infvit-test-linear', checkpoint=str(tmp_path / 'model.pth'))
    for key, value in source.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value)


def test_input_normalization():
    assert input_normalization('infvit-test-linear')[0] == IMAGENET_MEAN
    mean, std = input_normalization(DEMO_CLS)
    assert list(mean) == [127.5] * 3 and list(std) == [127.5] * 3


def test_classifier_normalises_as_its_config():
    """The demo config sets mmpretrain's top-level data_preprocessor (mean = std = 127.5); the
    model built outside the Runner must use it, not the unnormalised default."""
    model = build_classifier(DEMO_CLS, None)
    pre = model.data_preprocessor
    assert pre.mean.flatten().tolist() == [127.5] * 3 and pre.std.flatten().tolist() == [127.5] * 3
    batch = pre(dict(inputs=[torch.full((3, 8, 8), 255, dtype=torch.uint8)]), False)
    torch.testing.assert_close(batch['inputs'], torch.ones(1, 3, 8, 8))


def test_classifier_needs_a_head(tmp_path):
    config = tmp_path / 'backbone_only.py'
    config.write_text("model = dict(backbone=dict(type='mmlinear.InfViT', arch='infvit-test'))\n")
    with pytest.raises(ValueError, match='backbone_only.py has no classification head'):
        build_classifier(str(config))
