"""tools/model_converters/vit2infvit.py: the command line over mmlinear.apis.vit_conversion
(the conversions themselves are tested in tests/test_apis/test_vit_conversion.py)."""
import os
import os.path as osp
import subprocess
import sys

import pytest
import timm
import torch
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from safetensors.torch import save_file

from mmlinear.utils import load_checkpoint_file

SCRIPT = osp.join(REPO_ROOT, 'tools', 'model_converters', 'vit2infvit.py')
CONVERTER = load_tool('vit2infvit', osp.dirname(SCRIPT))


def run_converter(*args):
    """The converter's command line in this process; ``test_command_line`` runs the script
    itself once."""
    return run_tool_main(CONVERTER, *args)


@pytest.fixture
def timm_checkpoint(tmp_path):
    """A timm ViT (width 128, 2 blocks, 2 heads, 10 classes) as the hub stores it."""
    torch.manual_seed(0)
    model = timm.models.vision_transformer.VisionTransformer(
        img_size=32, patch_size=8, embed_dim=128, depth=2, num_heads=2, num_classes=10)
    path = tmp_path / 'model.safetensors'
    save_file(model.state_dict(), str(path))
    return path, len(model.state_dict())


def test_converts_and_reports(tmp_path, timm_checkpoint):
    src, num_source = timm_checkpoint
    dst = tmp_path / 'out' / 'infvit.pth'  # the folder is created
    result = run_converter(src, dst, '--attn-type', 'pure')
    assert result.returncode == 0, result.stderr
    # The source's tensors, the packed qkv weight and bias of each of the 2 blocks split in
    # three (+4 per block), plus one rho per block.
    assert f'converted {num_source + 2 * 4 + 2} tensors (timm layout)' in result.stdout
    checkpoint = load_checkpoint_file(str(dst))
    assert checkpoint['meta']['backbone']['attn_type'] == 'pure'
    assert checkpoint['meta']['head']['type'] == 'LinearClsHead'
    assert os.listdir(dst.parent) == ['infvit.pth']  # no temporary file left beside it


def test_existing_destination_is_kept_without_force(tmp_path, timm_checkpoint):
    src, _ = timm_checkpoint
    dst = tmp_path / 'infvit.pth'
    dst.write_bytes(b'the user\'s file')
    result = run_converter(src, dst)
    assert result.returncode == 1
    assert 'exists; pass --force to overwrite it' in result.stderr
    assert dst.read_bytes() == b'the user\'s file'
    for flag in ('--force', '--overwrite'):
        assert run_converter(src, dst, flag).returncode == 0
        assert 'state_dict' in load_checkpoint_file(str(dst))


@pytest.mark.parametrize(
    'args,message', [
        (['--num-heads', '3'], 'positive divisor of the width 128, got 3'),
        (['--attn-type', 'softmax', '--num-heads', '0'], 'positive divisor'),
    ],
    ids=['heads-3', 'heads-0'])
def test_bad_heads_fail_with_the_reason(tmp_path, timm_checkpoint, args, message):
    src, _ = timm_checkpoint
    dst = tmp_path / 'infvit.pth'
    result = run_converter(src, dst, *args)
    assert result.returncode == 1 and message in result.stderr
    assert not dst.exists()


def test_unknown_layout_and_unreadable_file_fail_with_the_reason(tmp_path):
    other = tmp_path / 'other.pth'
    torch.save({'conv.weight': torch.zeros(4, 3, 3, 3)}, str(other))
    result = run_converter(other, tmp_path / 'a.pth')
    assert result.returncode == 1
    assert 'matches none of the ViT layouts' in result.stderr and 'timm' in result.stderr
    broken = tmp_path / 'broken.pth'
    broken.write_bytes(b'\x00' * 64)
    result = run_converter(broken, tmp_path / 'b.pth')
    assert result.returncode == 1 and 'cannot read checkpoint' in result.stderr
    assert not (tmp_path / 'a.pth').exists() and not (tmp_path / 'b.pth').exists()


def test_command_line(tmp_path, timm_checkpoint):
    src, _ = timm_checkpoint
    dst = tmp_path / 'infvit.pth'
    result = subprocess.run(
        [sys.executable, SCRIPT,
         str(src), str(dst), '--attn-type', 'linear'],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True)
    assert result.returncode == 0, result.stderr
    assert "'attn_type': 'linear'" in result.stdout
    assert load_checkpoint_file(str(dst))['meta']['converter'] == 'vit2infvit'
