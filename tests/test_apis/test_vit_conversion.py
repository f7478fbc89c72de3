"""mmlinear.apis.vit_conversion: ViTs built and saved with the real libraries (mmpretrain,
timm), converted to InfViT; softmax InfViT reproduces them, linear / pure load strictly; bad
sources are refused with a message naming the problem.

transformers is not in the environment (requirements/tests.txt says why), so the Hugging Face
layouts are written by hand: the weights of a timm ViT with Hugging Face's LayerNorm epsilon
(1e-12; otherwise the same model as Hugging Face's ViT: pre-norm blocks, exact GELU, CLS
token, learned positions, final norm, classifier on the CLS token) under the key names that
transformers 5.24.0's ``save_pretrained`` writes for ``ViTForImageClassification`` and
``ViTModel``, and under its module names (``model.state_dict()``).
"""
import json
from functools import partial

import pytest
import timm
import torch
from mmengine.registry import DefaultScope
from mmengine.runner.checkpoint import save_checkpoint
from mmpretrain.models import ImageClassifier, VisionTransformer
from mmpretrain.registry import MODELS as MMPRETRAIN_MODELS
from safetensors.torch import save_file
from torch import nn

from mmlinear.apis.vit_conversion import (LAYOUTS, convert_vit_checkpoint, convert_vit_state_dict,
                                          save_converted)
from mmlinear.registry import MODELS
from mmlinear.utils import load_checkpoint_file

WIDTH, DEPTH, MLP, IMG, PATCH, CLASSES = 128, 2, 256, 32, 8, 10
# Two heads of 64 channels: what the converter infers without being told.
DEFAULT_HEADS = WIDTH // 64


def randomize(model: torch.nn.Module) -> torch.nn.Module:
    """Every tensor random (a trained model's state, not an initialisation), in float64 so
    that the comparisons can be tight."""
    torch.manual_seed(0)
    model.double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    return model


def images() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(2, 3, IMG, IMG, dtype=torch.float64)


# ----- sources, each saved the way its library saves it ---------------------------------
# Each returns (path to convert, CLS-token features of the source, its logits or None).


@pytest.fixture(autouse=True)
def mmpretrain_scope():
    """Every model here builds in mmpretrain's scope, whatever scope an earlier test left
    current (mmseg's and mmdet's init functions set theirs for the whole process)."""
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        yield


def mmpretrain_classifier(tmp_path, head='vit'):
    arch = dict(
        embed_dims=WIDTH, num_layers=DEPTH, num_heads=DEFAULT_HEADS, feedforward_channels=MLP)
    head_cfg = dict(
        vit=dict(type='VisionTransformerClsHead', num_classes=CLASSES, in_channels=WIDTH),
        vit_hidden=dict(
            type='VisionTransformerClsHead', num_classes=CLASSES, in_channels=WIDTH, hidden_dim=48),
        linear=dict(type='LinearClsHead', num_classes=CLASSES, in_channels=WIDTH))[head]
    model = randomize(
        MMPRETRAIN_MODELS.build(
            dict(
                type='ImageClassifier',
                backbone=dict(type='VisionTransformer', arch=arch, img_size=IMG, patch_size=PATCH),
                head=head_cfg)))
    path = str(tmp_path / 'epoch_1.pth')
    # The layout of an mmengine Runner checkpoint: meta, state dict, optimizer state.
    save_checkpoint(
        dict(
            meta=dict(epoch=1, iter=10, mmengine_version='0.10.7'),
            state_dict=model.state_dict(),
            optimizer=dict(state={}, param_groups=[dict(lr=1e-3, params=[0])])), path)
    x = images()
    with torch.no_grad():
        return path, model.extract_feat(x)[-1], model(x, mode='tensor')


def mmpretrain_backbone(tmp_path):
    """A bare mmpretrain VisionTransformer state dict (no ``backbone.`` prefix)."""
    model = randomize(
        VisionTransformer(
            arch=dict(
                embed_dims=WIDTH,
                num_layers=DEPTH,
                num_heads=DEFAULT_HEADS,
                feedforward_channels=MLP),
            img_size=IMG,
            patch_size=PATCH))
    path = str(tmp_path / 'vit.pth')
    torch.save(model.state_dict(), path)
    with torch.no_grad():
        return path, model(images())[-1], None


def timm_vit(tmp_path, num_classes=CLASSES, saved_as='safetensors', **kwargs):
    model = randomize(
        timm.models.vision_transformer.VisionTransformer(
            img_size=IMG,
            patch_size=PATCH,
            embed_dim=kwargs.pop('embed_dim', WIDTH),
            depth=DEPTH,
            num_heads=kwargs.pop('num_heads', DEFAULT_HEADS),
            mlp_ratio=MLP / WIDTH,
            num_classes=num_classes,
            **kwargs))
    if saved_as == 'safetensors':  # the timm weights on the Hugging Face hub
        path = str(tmp_path / 'model.safetensors')
        save_file(model.state_dict(), path)
    else:  # timm's train.py layout: the state dict next to the epoch and the arch name (its
        # pickled argparse arguments left out: the weights-only loader refuses them)
        path = str(tmp_path / 'checkpoint-1.pth')
        torch.save(dict(epoch=1, arch='vit', state_dict=model.state_dict()), path)
    x = images()
    with torch.no_grad():
        feats = model.forward_head(model.forward_features(x), pre_logits=True)
        return path, feats, model(x) if num_classes else None


def hf_layout(timm_state: dict, classifier: bool, module_names: bool = False) -> dict:
    """A timm ViT state dict under Hugging Face's keys: ``save_pretrained``'s
    (``[vit.]encoder.layer.{i}.attention.attention.query``, separate q/k/v) or, with
    ``module_names``, transformers 5's modules (``layers.{i}.attention.q_proj``). A
    ``ViTModel`` (``classifier=False``) has no ``vit.`` prefix and a pooler."""
    prefix = 'vit.' if classifier else ''
    block = 'layers.{}.' if module_names else 'encoder.layer.{}.'
    names = dict(
        norm1='layernorm_before',
        norm2='layernorm_after',
        fc1='mlp.fc1' if module_names else 'intermediate.dense',
        fc2='mlp.fc2' if module_names else 'output.dense',
        proj='attention.o_proj' if module_names else 'attention.output.dense')
    qkv = (('attention.q_proj', 'attention.k_proj', 'attention.v_proj') if module_names else
           ('attention.attention.query', 'attention.attention.key', 'attention.attention.value'))
    out = {
        prefix + 'embeddings.cls_token': timm_state['cls_token'],
        prefix + 'embeddings.position_embeddings': timm_state['pos_embed'],
    }
    for kind in ('weight', 'bias'):
        out[f'{prefix}embeddings.patch_embeddings.projection.{kind}'] = \
            timm_state[f'patch_embed.proj.{kind}']
        for i in range(DEPTH):
            key = prefix + block.format(i)
            for name in ('norm1', 'norm2'):
                out[f'{key}{names[name]}.{kind}'] = timm_state[f'blocks.{i}.{name}.{kind}']
            for name in ('fc1', 'fc2'):
                out[f'{key}{names[name]}.{kind}'] = timm_state[f'blocks.{i}.mlp.{name}.{kind}']
            out[f'{key}{names["proj"]}.{kind}'] = timm_state[f'blocks.{i}.attn.proj.{kind}']
            for name, part in zip(qkv, timm_state[f'blocks.{i}.attn.qkv.{kind}'].chunk(3)):
                out[f'{key}{name}.{kind}'] = part.clone()
        out[f'{prefix}layernorm.{kind}'] = timm_state[f'norm.{kind}']
        if classifier:
            out[f'classifier.{kind}'] = timm_state[f'head.{kind}']
    if not classifier:  # ViTModel's pooler: dense + tanh on the CLS token
        out['pooler.dense.weight'] = torch.randn(WIDTH, WIDTH, dtype=torch.float64)
        out['pooler.dense.bias'] = torch.randn(WIDTH, dtype=torch.float64)
    return out


def hf_stand_in(num_heads: int, classifier: bool):
    """The Hugging Face ViT's computation, as a timm ViT with its LayerNorm epsilon."""
    return randomize(
        timm.models.vision_transformer.VisionTransformer(
            img_size=IMG,
            patch_size=PATCH,
            embed_dim=WIDTH,
            depth=DEPTH,
            num_heads=num_heads,
            mlp_ratio=MLP / WIDTH,
            num_classes=CLASSES if classifier else 0,
            norm_layer=partial(nn.LayerNorm, eps=1e-12)))


def write_hf_folder(folder, state: dict, num_heads: int, weights: str) -> None:
    """A model folder as ``save_pretrained`` writes it (the config.json keys the converter
    reads, with ViTConfig's values), holding ``model.safetensors`` or, as transformers 4
    saved it, ``pytorch_model.bin`` (``torch.save`` of the state dict)."""
    folder.mkdir()
    config = dict(
        model_type='vit',
        hidden_size=WIDTH,
        num_hidden_layers=DEPTH,
        num_attention_heads=num_heads,
        intermediate_size=MLP,
        hidden_act='gelu',
        layer_norm_eps=1e-12,
        image_size=IMG,
        patch_size=PATCH,
        qkv_bias=True)
    (folder / 'config.json').write_text(json.dumps(config))
    if weights == 'model.safetensors':
        save_file(state, str(folder / weights))
    else:
        torch.save(state, str(folder / weights))


def hf_source(tmp_path, classifier=True, weights='model.safetensors'):
    """A Hugging Face folder with 4 heads of 32 channels: only config.json can say so."""
    model = hf_stand_in(num_heads=4, classifier=classifier)
    write_hf_folder(tmp_path / 'hf', hf_layout(model.state_dict(), classifier), 4, weights)
    x = images()
    with torch.no_grad():
        feats = model.forward_head(model.forward_features(x), pre_logits=True)
        return str(tmp_path / 'hf'), feats, model(x) if classifier else None


def hf_module_names(tmp_path):
    """``torch.save(model.state_dict())`` of a transformers 5 ViTModel: its module names and
    no config.json, so the defaults apply (width / 64 heads, epsilon 1e-12)."""
    model = hf_stand_in(num_heads=DEFAULT_HEADS, classifier=False)
    path = str(tmp_path / 'vit_state_dict.pth')
    torch.save(hf_layout(model.state_dict(), classifier=False, module_names=True), path)
    with torch.no_grad():
        return path, model.forward_head(model.forward_features(images()), pre_logits=True), None


SOURCES = {
    'mmpretrain-vit-head': lambda p: mmpretrain_classifier(p, 'vit'),
    'mmpretrain-vit-head-hidden': lambda p: mmpretrain_classifier(p, 'vit_hidden'),
    'mmpretrain-linear-head': lambda p: mmpretrain_classifier(p, 'linear'),
    'mmpretrain-backbone': mmpretrain_backbone,
    'timm-hub-safetensors': timm_vit,
    'timm-train-checkpoint': lambda p: timm_vit(p, saved_as='pth'),
    'timm-no-head': lambda p: timm_vit(p, num_classes=0),
    'hf-classifier-folder': hf_source,
    'hf-model-pytorch-bin': lambda p: hf_source(p, classifier=False, weights='pytorch_model.bin'),
    'hf-module-names': hf_module_names,
}
LAYOUT_OF = {'mmpretrain': 'mmpretrain', 'timm': 'timm', 'hf': 'huggingface'}


def build_converted(meta: dict, state: dict) -> torch.nn.Module:
    """What the meta describes, loaded strictly: an mmpretrain ImageClassifier with the
    converted head, or the InfViT backbone alone when the source has no classifier."""
    if meta['head'] is None:
        model = MODELS.build(meta['backbone'])
        state = {k[len('backbone.'):]: v for k, v in state.items()}
    else:
        model = MMPRETRAIN_MODELS.build(
            dict(type='ImageClassifier', backbone=meta['backbone'], head=meta['head']))
    # float64 first: loading into float32 parameters would round the weights.
    model.double().load_state_dict(state, strict=True)
    return model.eval()


def outputs(model: torch.nn.Module, x: torch.Tensor):
    with torch.no_grad():
        if isinstance(model, ImageClassifier):
            return model.extract_feat(x)[-1], model(x, mode='tensor')
        return model(x)[-1], None


@pytest.mark.parametrize('source', sorted(SOURCES))
def test_softmax_conversion_reproduces_the_source(tmp_path, source):
    path, feats, logits = SOURCES[source](tmp_path)
    converted = convert_vit_checkpoint(path, attn_type='softmax')
    meta = converted.meta
    assert meta['source']['layout'] == LAYOUT_OF[source.split('-')[0]]
    assert (meta['head'] is None) == (logits is None)
    dst = str(tmp_path / 'infvit.pth')
    save_converted(converted, dst)
    # Read back as every mmlinear path reads checkpoints: torch.load(weights_only=True).
    saved = load_checkpoint_file(dst)
    assert saved['meta'] == meta
    model = build_converted(saved['meta'], saved['state_dict'])
    out_feats, out_logits = outputs(model, images())
    assert out_feats.shape == feats.shape
    torch.testing.assert_close(out_feats, feats, rtol=0, atol=1e-10)
    if logits is not None:
        torch.testing.assert_close(out_logits, logits, rtol=0, atol=1e-10)


def test_meta_describes_the_source(tmp_path):
    path, _, _ = hf_source(tmp_path, classifier=False, weights='pytorch_model.bin')
    meta = convert_vit_checkpoint(path, attn_type='pure').meta
    assert meta['backbone'] == dict(
        type='mmlinear.InfViT',
        arch=dict(embed_dims=WIDTH, num_layers=DEPTH, num_heads=4, feedforward_channels=MLP),
        attn_type='pure',
        img_size=IMG,
        patch_size=PATCH,
        in_channels=3,
        qkv_bias=True,
        final_norm=True,
        layer_norm_eps=1e-12,  # from config.json (Hugging Face's default, not InfViT's)
        out_type='cls_token')
    assert meta['head'] is None
    assert meta['source'] == dict(
        layout='huggingface', dropped_keys=['pooler.dense.weight', 'pooler.dense.bias'], file='hf')


def test_layer_norm_eps_matters(tmp_path):
    """The epsilon the weights were trained with is part of the model: InfViT's default
    (1e-6) in place of Hugging Face's 1e-12 changes the features well beyond the tolerance
    the faithful conversion meets."""
    path, feats, _ = hf_source(tmp_path)
    converted = convert_vit_checkpoint(path, attn_type='softmax', layer_norm_eps=1e-6)
    out_feats, _ = outputs(build_converted(converted.meta, converted.state_dict), images())
    assert (out_feats - feats).abs().max() > 1e-8


def test_the_attention_only_changes_rho(tmp_path):
    """Against the softmax conversion, linear and pure conversions hold the same tensors
    plus one rho per block at InfSA's initial value (0.95 per head), load strictly and run."""
    path, _, _ = timm_vit(tmp_path)
    reference = convert_vit_checkpoint(path, attn_type='softmax').state_dict
    for attn_type in ('linear', 'pure'):
        converted = convert_vit_checkpoint(path, attn_type=attn_type)
        rho = {k: v for k, v in converted.state_dict.items() if k.endswith('rho_logit')}
        assert sorted(rho) == [f'backbone.blocks.{i}.attn.rho_logit' for i in range(DEPTH)]
        rest = {k: v for k, v in converted.state_dict.items() if k not in rho}
        assert list(rest) == list(reference)
        assert all(torch.equal(rest[k], reference[k]) for k in rest)
        model = build_converted(converted.meta, converted.state_dict)
        for block in model.backbone.blocks:
            torch.testing.assert_close(block.attn.rho.double(),
                                       torch.full((DEFAULT_HEADS, ), 0.95, dtype=torch.float64))
        feats, logits = outputs(model, images())
        assert feats.shape == (2, WIDTH) and logits.shape == (2, CLASSES)
        assert torch.isfinite(logits).all()


@pytest.mark.parametrize('source', ['mmpretrain-vit-head', 'hf-classifier-folder'])
@pytest.mark.parametrize('attn_type', ['linear', 'pure'])
def test_infsa_conversions_load_strictly(tmp_path, source, attn_type):
    path, _, _ = SOURCES[source](tmp_path)
    converted = convert_vit_checkpoint(path, attn_type=attn_type)
    model = build_converted(converted.meta, converted.state_dict)  # strict=True inside
    feats, logits = outputs(model, images())
    assert torch.isfinite(feats).all() and torch.isfinite(logits).all()


def test_float32_conversion_within_1e5(tmp_path):
    """The precision users run in: float32 source and conversion agree to 1e-5."""
    model = timm.models.vision_transformer.VisionTransformer(
        img_size=IMG,
        patch_size=PATCH,
        embed_dim=WIDTH,
        depth=DEPTH,
        num_heads=DEFAULT_HEADS,
        num_classes=CLASSES).eval()
    path = str(tmp_path / 'model.safetensors')
    save_file(model.state_dict(), path)
    converted = convert_vit_checkpoint(path, attn_type='softmax')
    infvit = MMPRETRAIN_MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=converted.meta['backbone'],
            head=converted.meta['head'])).eval()
    infvit.load_state_dict(converted.state_dict, strict=True)
    x = images().float()
    with torch.no_grad():
        torch.testing.assert_close(infvit(x, mode='tensor'), model(x), rtol=0, atol=1e-5)


def test_vit_l16_has_the_shape_of_infvit_24l():
    """A ViT-L/16 (timm's, on the meta device) converts to the infvit-24l preset at 224 px,
    with InfViT's own LayerNorm epsilon: the fine-tune config's premise."""
    from mmlinear.models import InfViT
    with torch.device('meta'):
        vit_l = timm.create_model('vit_large_patch16_224', pretrained=False)
    meta = convert_vit_state_dict(vit_l.state_dict(), attn_type='pure').meta
    backbone = meta['backbone']
    assert backbone['arch'] == InfViT.arch_zoo['infvit-24l']
    assert (backbone['img_size'], backbone['patch_size']) == (224, 16)
    assert backbone['layer_norm_eps'] == 1e-6 and backbone['qkv_bias'] and backbone['final_norm']
    assert meta['head'] == dict(type='LinearClsHead', num_classes=1000, in_channels=1024)


def test_num_heads_override(tmp_path):
    """A width that is not a multiple of 64 needs --num-heads; with it the conversion
    reproduces the source."""
    path, feats, logits = timm_vit(tmp_path, embed_dim=96, num_heads=3)
    with pytest.raises(ValueError, match=r'width 96 is not a multiple of 64.*--num-heads'):
        convert_vit_checkpoint(path, attn_type='softmax')
    with pytest.raises(ValueError, match=r'positive divisor of the width 96, got 5'):
        convert_vit_checkpoint(path, attn_type='softmax', num_heads=5)
    converted = convert_vit_checkpoint(path, attn_type='softmax', num_heads=3)
    out_feats, out_logits = outputs(build_converted(converted.meta, converted.state_dict), images())
    torch.testing.assert_close(out_logits, logits, rtol=0, atol=1e-10)


def test_unknown_layout_names_the_known_ones():
    state = {
        'patch_embed.proj.weight': torch.zeros(8, 3, 4, 4),
        'blocks.0.linear1.w': torch.zeros(8, 8)
    }
    with pytest.raises(ValueError, match='matches none') as info:
        convert_vit_state_dict(state)
    for layout in LAYOUTS:
        assert layout.description in str(info.value)
    assert 'blocks.0.linear1.w' in str(info.value)


@pytest.mark.parametrize(
    'kwargs,match',
    [
        (dict(init_values=1e-5), r'no place for: \[.*ls1\.gamma'),  # layer scale
        (dict(qk_norm=True), r'no place for: \[.*q_norm'),
        (dict(reg_tokens=4), r'no place for: \[.*reg_token'),
        (dict(global_pool='avg'), r'no place for: \[.*fc_norm'),  # norm after pooling
        (dict(no_embed_class=True), r'position table has 16 entries'),
        (dict(class_token=False, global_pool='avg', fc_norm=False), 'no tensor for .*cls_token'),
    ],
    ids=[
        'layer-scale', 'qk-norm', 'register-tokens', 'fc-norm', 'no-embed-class', 'no-class-token'
    ])
def test_timm_variants_without_an_infvit_counterpart_are_refused(tmp_path, kwargs, match):
    path, _, _ = timm_vit(tmp_path, **kwargs)
    with pytest.raises(ValueError, match=match):
        convert_vit_checkpoint(path)


def test_unreadable_and_missing_sources(tmp_path):
    garbage = bytes(range(256)) * 4
    (tmp_path / 'bad.pth').write_bytes(garbage)
    (tmp_path / 'bad.safetensors').write_bytes(garbage)
    (tmp_path / 'weights.txt').write_text('not weights')
    (tmp_path / 'empty_folder').mkdir()
    (tmp_path / 'config_only').mkdir()
    (tmp_path / 'config_only' / 'config.json').write_text(json.dumps(dict(model_type='vit')))
    with pytest.raises(ValueError, match='not a file written by torch.save'):
        convert_vit_checkpoint(str(tmp_path / 'bad.pth'))
    with pytest.raises(ValueError, match='cannot read .* as a .safetensors file'):
        convert_vit_checkpoint(str(tmp_path / 'bad.safetensors'))
    with pytest.raises(ValueError, match="unknown checkpoint extension '.txt'"):
        convert_vit_checkpoint(str(tmp_path / 'weights.txt'))
    with pytest.raises(FileNotFoundError, match='not found'):
        convert_vit_checkpoint(str(tmp_path / 'missing.pth'))
    for folder in ('empty_folder', 'config_only'):
        with pytest.raises(FileNotFoundError, match='holds none of model.safetensors'):
            convert_vit_checkpoint(str(tmp_path / folder))


def test_attention_types_without_weights_to_load_are_refused(tmp_path):
    path, _, _ = timm_vit(tmp_path)
    with pytest.raises(
            ValueError,
            match=r"attn_type must be one of \('linear', 'pure', "
            r"'softmax'\), got 'none'"):
        convert_vit_checkpoint(path, attn_type='none')


def test_unsupported_activation_is_refused(tmp_path):
    path, _, _ = hf_source(tmp_path)
    config_file = tmp_path / 'hf' / 'config.json'
    config = json.loads(config_file.read_text())
    config['hidden_act'] = 'gelu_new'
    config_file.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="hidden_act='gelu_new'"):
        convert_vit_checkpoint(path)
