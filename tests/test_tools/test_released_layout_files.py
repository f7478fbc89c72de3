"""The WeightFormer and VECA converters' command lines on files in the released checkpoints'
containers (tests/data/released_layouts: the containers the official training / hub code
saves): they convert into checkpoints our models load strictly. The conversions themselves
are tested on every released layout in tests/test_apis/test_released_layouts.py."""
import os.path as osp

import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from released_layouts import (TEACHER_WIDTH, fake_state, read_layout, training_entries, veca_holder,
                              weightformer_classifier)

from mmlinear.apis.weightformer_conversion import HEAD_MAP

CONVERTERS = osp.join(REPO_ROOT, 'tools', 'model_converters')
WEIGHTFORMER_CONVERTER = load_tool('weightformer2mmlinear', CONVERTERS)
VECA_CONVERTER = load_tool('veca2mmlinear', CONVERTERS)


def run_main(converter, *args):
    """The converter's command line in this process; its return code and messages."""
    result = run_tool_main(converter, *args)
    return result.returncode, result.stdout + result.stderr


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
        assert torch.equal(loaded[HEAD_MAP.get(key, f'backbone.{key}')], value), key


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
