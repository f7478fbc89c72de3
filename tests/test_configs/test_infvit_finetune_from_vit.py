"""configs/infvit/infvit-24l-pure_8xb128-coslr-50e_in1k-ft-from-vit-l16.py: the backbone
starts from a converted ViT through ``init_cfg=dict(type='Pretrained', prefix='backbone.')``
and trains with layer-wise lr decay.

A real ViT-L/16 checkpoint is 1.2 GB, so the loading is exercised on a small timm ViT
converted the same way, with the config's arch, image size and head width overridden to fit
it; that ViT-L/16 itself has the infvit-24l shape is checked on the meta device in
tests/test_apis/test_vit_conversion.py (test_vit_l16_has_the_shape_of_infvit_24l), and the
config as it is loads a full-size converted ViT-L/16 in a test marked slow.
"""
import os.path as osp

import pytest
import timm
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODELS, init_default_scope
from safetensors.torch import save_file

import mmlinear  # noqa: F401
from mmlinear.apis.vit_conversion import convert_vit_checkpoint, save_converted

CONFIG = osp.join(REPO_ROOT, 'configs', 'infvit',
                  'infvit-24l-pure_8xb128-coslr-50e_in1k-ft-from-vit-l16.py')
WIDTH, DEPTH = 128, 3


@pytest.fixture
def converted_vit(tmp_path):
    """A small timm ViT converted to Pure InfViT, as the config's comment says to."""
    torch.manual_seed(0)
    vit = timm.models.vision_transformer.VisionTransformer(
        img_size=32, patch_size=8, embed_dim=WIDTH, depth=DEPTH, num_heads=2, num_classes=21)
    src = str(tmp_path / 'model.safetensors')
    save_file(vit.state_dict(), src)
    converted = convert_vit_checkpoint(src, attn_type='pure')
    dst = str(tmp_path / 'infvit-pure_from-vit.pth')
    save_converted(converted, dst)
    return dst, converted


def small_model_config(checkpoint: str, meta: dict) -> Config:
    """The config with the small ViT's shape and the converted file in place of ViT-L's."""
    cfg = Config.fromfile(CONFIG)
    cfg.model.backbone.update(arch=meta['backbone']['arch'], img_size=32, patch_size=8)
    cfg.model.backbone.init_cfg.checkpoint = checkpoint
    cfg.model.head.in_channels = WIDTH
    return cfg


def test_config_starts_from_a_converted_vit_l16():
    cfg = Config.fromfile(CONFIG)
    backbone = cfg.model.backbone
    assert (backbone.arch, backbone.attn_type) == ('infvit-24l', 'pure')
    assert (backbone.img_size, backbone.patch_size) == (224, 16)
    assert backbone.init_cfg == dict(
        type='Pretrained',
        checkpoint='checkpoints/infvit-24l-pure_from-vit-l16.pth',
        prefix='backbone.')


def test_backbone_loads_the_converted_weights(converted_vit):
    checkpoint, converted = converted_vit
    cfg = small_model_config(checkpoint, converted.meta)
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    model.init_weights()
    loaded = model.backbone.state_dict()
    expected = {
        k[len('backbone.'):]: v
        for k, v in converted.state_dict.items() if k.startswith('backbone.')
    }
    assert sorted(loaded) == sorted(expected)
    for key, value in expected.items():
        assert torch.equal(loaded[key], value), key
    # The ViT's 21-class head is not the 1000-class head being fine-tuned.
    assert model.head.layers.head.weight.shape == (1000, WIDTH)
    with torch.no_grad():
        logits = model(torch.randn(2, 3, 32, 32), mode='tensor')
    assert logits.shape == (2, 1000) and torch.isfinite(logits).all()


def test_layer_wise_lr_decay(converted_vit):
    """mmpretrain's layer-decay constructor reads InfViT's depths: the head and final norm
    at the full lr, block i at lr * 0.75 ** (DEPTH - i), the stem at lr * 0.75 ** (DEPTH + 1);
    no weight decay on norms, biases, the CLS token, positions and rho."""
    checkpoint, converted = converted_vit
    cfg = small_model_config(checkpoint, converted.meta)
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    groups = {
        group['param_name']: group
        for group in build_optim_wrapper(model, cfg.optim_wrapper).optimizer.param_groups
    }
    lr, rate = cfg.optim_wrapper.optimizer.lr, cfg.optim_wrapper.paramwise_cfg.layer_decay_rate
    expected_scale = {
        'head.layers.head.weight': 1.,
        'backbone.final_norm.weight': 1.,
        'backbone.blocks.2.attn.q_proj.weight': rate,
        'backbone.blocks.0.ffn.fc1.weight': rate**DEPTH,
        'backbone.patch_embed.projection.weight': rate**(DEPTH + 1),
        'backbone.pos_embed': rate**(DEPTH + 1),
    }
    for name, scale in expected_scale.items():
        assert groups[name]['lr'] == pytest.approx(lr * scale), name
    wd = cfg.optim_wrapper.optimizer.weight_decay
    for name in ('backbone.blocks.0.attn.rho_logit', 'backbone.cls_token', 'backbone.pos_embed',
                 'backbone.blocks.1.ln1.weight', 'backbone.blocks.1.attn.q_proj.bias',
                 'backbone.final_norm.bias'):
        assert groups[name]['weight_decay'] == 0, name
    assert groups['backbone.blocks.1.attn.q_proj.weight']['weight_decay'] == wd


@pytest.mark.slow
def test_full_size_vit_l16_loads_into_the_config(tmp_path):
    """The config as it is (only the checkpoint path changed) loads a converted ViT-L/16 of
    timm's (random weights: 1.2 GB written, converted and read back)."""
    from mmlinear.utils import load_checkpoint_file
    torch.manual_seed(0)
    src = str(tmp_path / 'model.safetensors')
    save_file(timm.create_model('vit_large_patch16_224', pretrained=False).state_dict(), src)
    dst = str(tmp_path / 'infvit-24l-pure_from-vit-l16.pth')
    save_converted(convert_vit_checkpoint(src, attn_type='pure'), dst)
    cfg = Config.fromfile(CONFIG)
    cfg.model.backbone.init_cfg.checkpoint = dst
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    model.init_weights()
    saved = {
        k[len('backbone.'):]: v
        for k, v in load_checkpoint_file(dst)['state_dict'].items() if k.startswith('backbone.')
    }
    loaded = model.backbone.state_dict()
    assert sorted(loaded) == sorted(saved)
    for key, value in loaded.items():
        assert torch.equal(value, saved[key]), key
