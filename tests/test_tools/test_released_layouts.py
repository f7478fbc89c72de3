"""The WeightFormer and VECA converters on the released checkpoints' own layouts
(tests/data/released_layouts: every key, shape and dtype of each released model as the
official code builds it, and the containers its training / hub code saves): every layout
converts and loads strictly into our preset, and the files in each container convert on the
command line's path into checkpoints our models load strictly."""
import os.path as osp

import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from mmengine.registry import MODELS, init_default_scope
from released_layouts import fake_state, read_layout, training_entries
from torch import nn

from mmlinear.models import VECA, WeightFormer

CONVERTERS = osp.join(REPO_ROOT, 'tools', 'model_converters')
WEIGHTFORMER_CONVERTER = load_tool('weightformer2mmlinear', CONVERTERS)
VECA_CONVERTER = load_tool('veca2mmlinear', CONVERTERS)
WEIGHTFORMER_ARCHS = {'weightformer-t': 't', 'weightformer-s': 's', 'weightformer-b': 'b'}
VECA_ARCHS = {
    'veca-small': 'small',
    'veca-splus': 'splus',
    'veca-base': 'base',
    'veca-large': 'large'
}
TEACHER_WIDTH = 768  # DINOv3 ViT-B/16: the released students project to it


def weightformer_classifier(arch):
    init_default_scope('mmpretrain')
    return MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(type='mmlinear.WeightFormer', arch=arch, out_type='avg_featmap'),
            neck=None,
            head=dict(
                type='LinearClsHead',
                num_classes=1000,
                in_channels=WeightFormer.arch_zoo[arch]['embed_dims'])))


def veca_holder(arch, out_channels):
    """A module holding our VECA as ``backbone``, as a model built from a config does."""
    holder = nn.Module()
    holder.backbone = VECA(arch=arch, out_channels=out_channels, init_cfg=None)
    return holder


def run_main(converter, *args):
    """The converter's command line in this process; its return code and messages."""
    result = run_tool_main(converter, *args)
    return result.returncode, result.stdout + result.stderr


def assert_loads_strictly(model, state):
    """``state`` has exactly ``model``'s keys and shapes (meta tensors are assigned)."""
    model.load_state_dict(state, strict=True, assign=True)


@pytest.mark.parametrize('name', sorted(WEIGHTFORMER_ARCHS))
def test_released_weightformer_layout_loads_into_the_preset_classifier(name):
    layout = read_layout(name)
    arch = WEIGHTFORMER_ARCHS[name]
    state = fake_state(layout, device='meta')
    preset = WeightFormer.arch_zoo[arch]
    inferred = WEIGHTFORMER_CONVERTER.infer_arch(state)
    assert inferred == {key: preset[key] for key in inferred}
    converted = WEIGHTFORMER_CONVERTER.convert(state)
    assert list(converted) == [
        WEIGHTFORMER_CONVERTER.HEAD_MAP.get(key, f'backbone.{key}') for key in state
    ]
    with torch.device('meta'):
        model = weightformer_classifier(arch)
    assert_loads_strictly(model, converted)
    assert sum(v.numel() for v in converted.values()) == layout['num_parameters']


@pytest.mark.parametrize('name', sorted(VECA_ARCHS))
def test_released_veca_layout_loads_into_the_preset_backbone(name):
    layout = read_layout(name)
    arch = VECA_ARCHS[name]
    state = fake_state(layout, device='meta')
    # The head count comes from the checkpoint's config, as the converter reads it.
    model_args = VECA_CONVERTER.infer_model_args(state, layout['release']['config'])
    preset = VECA.arch_zoo[arch]
    assert model_args['arch'] == {key: preset[key] for key in model_args['arch']}
    width = preset['embed_dims']
    assert model_args['out_channels'] == (None if width == TEACHER_WIDTH else TEACHER_WIDTH)
    converted = VECA_CONVERTER.convert(state, model_args)
    assert list(converted) == [f'backbone.{key}' for key in state]
    with torch.device('meta'):
        holder = veca_holder(arch, model_args['out_channels'])
    assert_loads_strictly(holder, converted)
    assert sum(v.numel() for v in converted.values()) == layout['num_parameters']


@pytest.mark.parametrize('container', ['torch_save', 'safetensors'])
def test_released_weightformer_t_files_convert(container, tmp_path):
    layout = read_layout('weightformer-t')
    saved_as = layout['release']['containers'][container]
    state = fake_state(layout)
    if container == 'safetensors':
        from safetensors.torch import save_file
        src = tmp_path / 'model.safetensors'
        save_file(state, str(src))
    else:
        # The training script's file; its yacs `config` entry is a pickled class, which no
        # weights-only load accepts, so it is left out here (see the layout's note).
        src = tmp_path / 'wfm-t.pth'
        torch.save({saved_as['state_dict_under']: state, **training_entries(saved_as)}, str(src))
    dst = tmp_path / 'wfm-t_mmlinear.pth'
    code, output = run_main(WEIGHTFORMER_CONVERTER, src, dst)
    assert code == 0, output
    converted = torch.load(str(dst), map_location='cpu', weights_only=True)['state_dict']
    model = weightformer_classifier('t')
    model.load_state_dict(converted, strict=True)
    loaded = model.state_dict()
    for key, value in state.items():
        assert torch.equal(loaded[WEIGHTFORMER_CONVERTER.HEAD_MAP.get(key, f'backbone.{key}')],
                           value), key


def test_released_veca_small_file_converts(tmp_path):
    layout = read_layout('veca-small')
    saved_as = layout['release']['containers']['torch_save']
    state = fake_state(layout)
    src = tmp_path / 'veca_multires_finetune_dinov3vitb16_q64_nested_best.pt'
    torch.save(
        {
            saved_as['state_dict_under']: state,
            'config': layout['release']['config'],
            **training_entries(saved_as)
        }, str(src))
    dst = tmp_path / 'veca-small_mmlinear.pth'
    code, output = run_main(VECA_CONVERTER, src, dst)
    assert code == 0, output
    checkpoint = torch.load(str(dst), map_location='cpu', weights_only=True)
    assert checkpoint['meta']['arch']['num_heads'] == 6
    assert checkpoint['meta']['out_channels'] == TEACHER_WIDTH
    holder = veca_holder('small', checkpoint['meta']['out_channels'])
    holder.load_state_dict(checkpoint['state_dict'], strict=True)
    loaded = holder.backbone.state_dict()
    for key, value in state.items():
        assert torch.equal(loaded[key], value), key
