"""tools/model_converters/weightformer2mmlinear.py: released layout -> mmlinear checkpoint.

The converter runs in this process (a subprocess costs seconds of imports each), except once
through its command line."""
import importlib.util
import os.path as osp
import subprocess
import sys

import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from mmengine.registry import MODELS, init_default_scope
from released_layouts import fake_state, read_layout

import mmlinear  # noqa: F401
from mmlinear.models import WeightFormer

SCRIPT = osp.join(REPO_ROOT, 'tools', 'model_converters', 'weightformer2mmlinear.py')
HAS_SAFETENSORS = importlib.util.find_spec('safetensors') is not None


def run_converter(src, dst):
    return run_tool_main(load_tool('weightformer2mmlinear', osp.dirname(SCRIPT)), src, dst)


@pytest.fixture(scope='module')
def released():
    """A WeightFormer-T state dict in the released layout (tests/data/released_layouts), with
    its 1000-way head, random values."""
    return fake_state(read_layout('weightformer-t'))


def reference_logits(state, x):
    backbone = WeightFormer(arch='t', init_cfg=None)
    backbone.load_state_dict({k: v for k, v in state.items() if not k.startswith('head.')})
    backbone.eval()
    with torch.no_grad():
        feat = backbone(x)[-1]
        return feat @ state['head.weight'].t() + state['head.bias']


def build_classifier():
    init_default_scope('mmpretrain')
    return MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(type='mmlinear.WeightFormer', arch='t', out_type='avg_featmap'),
            neck=None,
            head=dict(type='LinearClsHead', num_classes=1000, in_channels=192)))


def save_source(state, path, wrapper):
    if path.suffix == '.safetensors':
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        torch.save(state if wrapper is None else {wrapper: state, 'epoch': 299}, str(path))


@pytest.mark.parametrize('name,wrapper', [
    ('wfm_t.pth', None),
    ('wfm_t_model.pth', 'model'),
    ('wfm_t_sd.pth', 'state_dict'),
    pytest.param(
        'model.safetensors',
        None,
        marks=pytest.mark.skipif(not HAS_SAFETENSORS, reason='no safetensors')),
])
def test_convert_and_load(tmp_path, released, name, wrapper):
    src = tmp_path / name
    save_source(released, src, wrapper)
    dst = tmp_path / 'out' / 'wfm_t_mmlinear.pth'
    if wrapper is None and src.suffix == '.pth':  # once through the command line
        result = subprocess.run(
            [sys.executable, SCRIPT, str(src), str(dst)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True)
    else:
        result = run_converter(src, dst)
    assert result.returncode == 0, result.stdout + result.stderr

    ckpt = torch.load(str(dst), map_location='cpu', weights_only=True)
    assert set(ckpt) == {'state_dict'}
    sd = ckpt['state_dict']
    assert 'head.fc.weight' in sd and 'head.fc.bias' in sd
    assert all(k.startswith('backbone.') or k.startswith('head.fc.') for k in sd)

    model = build_classifier()
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not missing and not unexpected
    model.eval()
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        feats = model.extract_feat(x)
        logits = model.head(feats)
    torch.testing.assert_close(logits, reference_logits(released, x), rtol=1e-5, atol=1e-5)


def test_missing_file(tmp_path):
    result = run_converter(tmp_path / 'nope.pth', tmp_path / 'out.pth')
    assert result.returncode != 0
    assert 'not found' in result.stderr and 'nope.pth' in result.stderr


def test_unknown_extension(tmp_path):
    src = tmp_path / 'weights.npz'
    src.write_bytes(b'0')
    result = run_converter(src, tmp_path / 'out.pth')
    assert result.returncode != 0
    assert 'extension' in result.stderr and '.npz' in result.stderr


def test_layout_mismatch(tmp_path, released):
    state = dict(released)
    state.pop('blocks.1.linear1.w1')
    state['blocks.0.extra.weight'] = torch.zeros(3)
    src = tmp_path / 'bad.pth'
    torch.save(state, str(src))
    dst = tmp_path / 'out.pth'
    result = run_converter(src, dst)
    assert result.returncode != 0
    assert 'missing keys' in result.stderr and 'blocks.1.linear1.w1' in result.stderr
    assert 'unexpected keys' in result.stderr and 'blocks.0.extra.weight' in result.stderr
    assert not dst.exists()


def test_not_weightformer(tmp_path):
    src = tmp_path / 'other.pth'
    torch.save({'conv.weight': torch.zeros(2, 2)}, str(src))
    result = run_converter(src, tmp_path / 'out.pth')
    assert result.returncode != 0
    assert 'WeightFormer key layout' in result.stderr


class TrainingConfig(dict):
    """Stands for the config object the official training script pickles beside the weights."""


def test_training_checkpoint_with_a_pickled_config_is_refused_in_one_line(tmp_path, released):
    src = tmp_path / 'ckpt_epoch_299.pth'
    torch.save({'model': released, 'config': TrainingConfig(lr=1e-3)}, str(src))
    dst = tmp_path / 'out.pth'
    result = run_converter(src, dst)
    assert result.returncode == 1
    assert 'Traceback' not in result.stderr
    assert 'refusing to load checkpoint' in result.stderr and 'TrainingConfig' in result.stderr
    assert not dst.exists()
