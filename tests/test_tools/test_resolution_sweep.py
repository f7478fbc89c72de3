import json
import os.path as osp

import pytest
import torch
from analysis_tools_loader import load_tool
from conftest import REPO_ROOT

resolution_sweep = load_tool('resolution_sweep')
VECA = osp.join(REPO_ROOT, 'configs', 'demo', 'veca-demo_shapes-cls.py')
INFVIT = osp.join(REPO_ROOT, 'configs', 'demo', 'infvit-demo-linear_shapes-cls.py')


def data_options(tiny_data, tmp_path):
    """The demo configs read data/shapes/cls; the tests point them at the session's copy."""
    configs = []
    for path in (VECA, INFVIT):
        text = (f"_base_ = ['{path}']\n"
                f"test_dataloader = dict(num_workers=0, persistent_workers=False, "
                f"dataset=dict(data_root='{tiny_data}/cls'))\n")
        local = tmp_path / osp.basename(path)
        local.write_text(text)
        configs.append(str(local))
    return configs


def test_veca_beside_a_dense_vit_at_every_resolution(tiny_data, tmp_path):
    veca, infvit = data_options(tiny_data, tmp_path)
    out = tmp_path / 'out'
    resolution_sweep.main([
        '--models', veca, infvit, '--resolutions', '64', '32', '--repeats', '1', '--out',
        str(out)
    ])
    result = json.loads((out / 'resolution_sweep.json').read_text())
    assert result['metric'] == 'accuracy/top1'
    assert set(result['results']) == {'veca-demo_shapes-cls', 'infvit-demo-linear_shapes-cls'}
    for rows in result['results'].values():
        assert [r['resolution'] for r in rows] == [32, 64]
        assert all(0 <= r['accuracy/top1'] <= 100 and r['latency_ms'] > 0 for r in rows)
    assert (out / 'resolution_sweep.png').read_bytes()[:4] == b'\x89PNG'


def test_bad_input_is_refused(tiny_data, tmp_path):
    veca, _ = data_options(tiny_data, tmp_path)
    with pytest.raises(SystemExit, match=r'at least one patch \(8 px for veca-demo'):
        resolution_sweep.main(['--models', veca, '--resolutions', '4', '--out', str(tmp_path)])
    with pytest.raises(SystemExit, match=r'needs one entry per model \(1\), got 2'):
        resolution_sweep.main(['--models', veca, '--checkpoints', 'a.pth', 'none'])
    other = tmp_path / 'other.pth'
    torch.save({'state_dict': {'backbone.cls_token': torch.zeros(1)}}, other)
    with pytest.raises(SystemExit, match='other.pth does not hold the model of'):
        resolution_sweep.main([
            '--models', veca, '--checkpoints',
            str(other), '--resolutions', '32', '--out',
            str(tmp_path)
        ])
    with pytest.raises(SystemExit, match="--metric 'mIoU' is not reported by every model"):
        resolution_sweep.main([
            '--models', veca, '--resolutions', '32', '--repeats', '1', '--metric', 'mIoU', '--out',
            str(tmp_path)
        ])
