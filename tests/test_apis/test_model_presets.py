import pytest
import torch

from mmlinear.apis import (BACKBONE_PRESETS, IMAGENET_MEAN, backbone_config, build_backbone,
                           build_classifier, input_normalization)
from mmlinear.models import VECA, InfViT, WeightFormer
from mmlinear.models.layers import ATTN_TYPES

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


@pytest.mark.parametrize('attn_type', ATTN_TYPES)
def test_infvit_4l_has_a_preset_of_every_token_mixer(attn_type):
    """The InfSA paper's efficiency comparison times all nine token mixers in InfViT-4L's
    body: each preset builds that body with its mixer and runs a forward pass."""
    backbone = build_backbone(f'infvit-4l-{attn_type}')
    assert backbone.attn_type == attn_type
    assert backbone.arch_settings == InfViT.arch_zoo['infvit-4l']
    backbone.eval()
    with torch.inference_mode():
        (cls_token, ) = backbone(torch.randn(1, 3, 32, 48))
    assert cls_token.shape == (1, 1024) and torch.isfinite(cls_token).all()


def test_the_linformer_preset_takes_1024_px_at_the_224_px_models_k():
    """Built with its defaults for 224 px, Linformer refuses the 4,097 tokens of 1024 px;
    the preset's projections cover them and keep k = 197 // 4 = 49."""
    mixer = build_backbone('infvit-4l-linformer', dict(init_cfg=None)).blocks[0].attn.mixer
    assert (mixer.max_tokens, mixer.proj_len) == (1 + 64 * 64, 49)
    q = k = v = torch.randn(1, 1, 1 + 64 * 64, mixer.head_dims)
    with torch.inference_mode():
        out, _ = mixer(q, k, v)
    assert out.shape == q.shape
    with pytest.raises(ValueError, match='at most max_tokens=4097'):
        mixer(*(torch.randn(1, 1, 4098, mixer.head_dims), ) * 3)
