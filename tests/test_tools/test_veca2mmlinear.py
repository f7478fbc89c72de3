"""tools/model_converters/veca2mmlinear.py: a checkpoint in the released layout (written
here with random weights) -> mmlinear checkpoint -> mmlinear.VECA with strict=True."""
import os.path as osp
import subprocess
import sys

import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from mmengine.runner import load_checkpoint
from torch import nn

from mmlinear.models import VECA

SCRIPT = osp.join(REPO_ROOT, 'tools', 'model_converters', 'veca2mmlinear.py')
ARCH = dict(embed_dims=128, num_layers=2, num_heads=4, feedforward_channels=192)

CONVERTER = load_tool('veca2mmlinear', osp.dirname(SCRIPT))


def run_converter(*args):
    """The converter's command line in this process; ``test_command_line`` runs the script
    itself once."""
    return run_tool_main(CONVERTER, *args)


def source_model(out_channels=None):
    """A VECA with every tensor random (the state of a trained model, not an init)."""
    torch.manual_seed(0)
    model = VECA(arch=ARCH, out_channels=out_channels, init_cfg=None)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.05)
        model.pos_alpha.fill_(0.2)
    return model.eval()


def save_released(model, path, prefix='module.', config=True):
    """The layout of the official ``save_ckpt``: the student state dict (here saved from a
    DDP wrapper, hence ``module.``) next to the config and training states."""
    payload = {
        'student': {
            prefix + k: v.clone()
            for k, v in model.state_dict().items()
        },
        'optimizer': {
            'state': {},
            'param_groups': [{
                'lr': 4e-4,
                'params': [0, 1]
            }]
        },
        'epoch': 3,
    }
    if config:
        payload['config'] = dict(
            num_heads=ARCH['num_heads'],
            hidden_dim=ARCH['embed_dims'],
            nested_budgets=(8, 16, 24, 32, 40, 48, 56, 64))
    torch.save(payload, str(path))


def features(model, x):
    with torch.no_grad():
        return model.forward_tokens(x, active_cores=24)


@pytest.mark.parametrize('prefix,out_channels', [('module.', None), ('module.student.', 96)])
def test_convert_and_load_strict(tmp_path, prefix, out_channels):
    source = source_model(out_channels)
    src = tmp_path / 'veca_multires_finetune_q64_nested_best.pt'
    save_released(source, src, prefix)
    dst = tmp_path / 'out' / 'veca_mmlinear.pth'
    result = run_converter(src, dst)
    assert result.returncode == 0, result.stdout + result.stderr

    ckpt = torch.load(str(dst), map_location='cpu', weights_only=True)
    assert set(ckpt) == {'state_dict', 'meta'}
    assert ckpt['meta']['arch'] == ARCH and ckpt['meta']['out_channels'] == out_channels
    state = ckpt['state_dict']
    assert all(k.startswith('backbone.') for k in state)
    assert len(state) == len(source.state_dict())

    # As a model's backbone, strictly.
    holder = nn.Module()
    holder.backbone = VECA(arch=ARCH, out_channels=out_channels, init_cfg=None).eval()
    holder.load_state_dict(state, strict=True)
    x = torch.randn(2, 3, 48, 80)
    expected, got = features(source, x), features(holder.backbone, x)
    torch.testing.assert_close(got['patches'], expected['patches'], atol=0, rtol=0)
    torch.testing.assert_close(got['global'], expected['global'], atol=0, rtol=0)

    # As configs load it: mmengine's load_checkpoint with the backbone prefix.
    backbone = VECA(arch=ARCH, out_channels=out_channels, init_cfg=None).eval()
    load_checkpoint(backbone, str(dst), revise_keys=[(r'^backbone\.', '')], strict=True)
    torch.testing.assert_close(
        features(backbone, x)['patches'], expected['patches'], atol=0, rtol=0)


def test_plain_state_dict_without_config_infers_the_heads(tmp_path):
    source = source_model()
    src = tmp_path / 'plain.pt'
    torch.save(source.state_dict(), str(src))
    dst = tmp_path / 'out.pth'
    result = run_converter(src, dst, '--num-heads', 4)
    assert result.returncode == 0, result.stderr
    assert torch.load(str(dst), weights_only=True)['meta']['arch']['num_heads'] == 4
    # Without config or option: the released head width of 64.
    result = run_converter(src, dst, '--force')
    assert result.returncode == 0, result.stderr
    assert torch.load(str(dst), weights_only=True)['meta']['arch']['num_heads'] == 2


def test_refuses_to_overwrite_without_force(tmp_path):
    src = tmp_path / 'veca.pt'
    save_released(source_model(), src)
    dst = tmp_path / 'out.pth'
    dst.write_bytes(b'keep me')
    result = run_converter(src, dst)
    assert result.returncode != 0 and '--force' in result.stderr
    assert dst.read_bytes() == b'keep me'
    result = run_converter(src, dst, '--force')
    assert result.returncode == 0, result.stderr
    assert 'state_dict' in torch.load(str(dst), weights_only=True)


def test_missing_and_unexpected_keys_are_listed(tmp_path):
    state = {
        k: v
        for k, v in source_model().state_dict().items() if k != 'blocks.1.attn.k_proj.bias'
    }
    state['blocks.0.extra.weight'] = torch.zeros(3)
    state['pos_alpha'] = torch.zeros(5)
    src = tmp_path / 'bad.pt'
    torch.save({'student': state, 'config': {'num_heads': 4}}, str(src))
    dst = tmp_path / 'out.pth'
    result = run_converter(src, dst)
    assert result.returncode != 0
    assert 'missing keys' in result.stderr and 'blocks.1.attn.k_proj.bias' in result.stderr
    assert 'unexpected keys' in result.stderr and 'blocks.0.extra.weight' in result.stderr
    assert 'pos_alpha: (5,) vs (1,)' in result.stderr
    assert not dst.exists()


def test_not_a_veca_checkpoint(tmp_path):
    src = tmp_path / 'other.pt'
    torch.save({'student': {'conv.weight': torch.zeros(2, 2)}}, str(src))
    result = run_converter(src, tmp_path / 'out.pth')
    assert result.returncode != 0 and 'VECA key layout' in result.stderr

    src = tmp_path / 'empty.pt'
    torch.save({'epoch': 1}, str(src))
    result = run_converter(src, tmp_path / 'out.pth')
    assert result.returncode != 0 and 'does not hold a state dict' in result.stderr

    result = run_converter(tmp_path / 'nope.pt', tmp_path / 'out.pth')
    assert result.returncode != 0 and 'not found' in result.stderr


def test_command_line(tmp_path):
    src = tmp_path / 'veca.pt'
    source = source_model()
    save_released(source, src)
    num_tensors = len(source.state_dict())
    dst = tmp_path / 'out.pth'
    result = subprocess.run(
        [sys.executable, SCRIPT, str(src), str(dst)], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f'converted {num_tensors} tensors' in result.stdout
    assert len(torch.load(str(dst), weights_only=True)['state_dict']) == num_tensors
    result = subprocess.run(
        [sys.executable, SCRIPT, str(src), str(dst)], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 1 and '--force' in result.stderr
