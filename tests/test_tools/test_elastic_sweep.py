import json
import os.path as osp

import pytest
from analysis_tools_loader import load_tool

elastic_sweep = load_tool('elastic_sweep')


def test_budgets_must_be_chunks_of_eight():
    assert elastic_sweep.check_budgets([64, 8, 32, 8], 64) == [8, 32, 64]
    with pytest.raises(ValueError, match=r'multiples of 8 in \[8, 64\], got \[12, 72, 0\]'):
        elastic_sweep.check_budgets([12, 72, 0, 16], 64)


def test_sweep_writes_loss_and_latency_per_budget(tiny_data, tmp_path):
    out = tmp_path / 'elastic'
    elastic_sweep.main([
        'veca-small', '--images',
        osp.join(tiny_data, 'cls', 'val', 'circle'), '--max-images', '2', '--img-size', '64',
        '--budgets', '8', '32', '64', '--repeats', '1', '--out',
        str(out)
    ])
    with open(out / 'elastic_sweep.json') as f:
        rows = json.load(f)['results']
    assert [r['active_cores'] for r in rows] == [8, 32, 64]
    assert rows[-1]['global_loss'] == pytest.approx(0, abs=1e-6)  # the reference budget
    assert all(r['latency_ms'] > 0 and r['global_loss'] >= -1e-6 for r in rows)
    assert (out / 'elastic_sweep.png').read_bytes()[:4] == b'\x89PNG'


def test_sweep_of_a_classifier_config_reports_top1(tiny_data, tmp_path):
    out = tmp_path / 'elastic_cls'
    root = osp.join(tiny_data, 'cls')
    elastic_sweep.main([
        'configs/demo/veca-demo_shapes-cls.py', '--img-size', '64', '--budgets', '8', '64',
        '--repeats', '1', '--cfg-options', f'test_dataloader.dataset.data_root={root}',
        'test_dataloader.num_workers=0', 'test_dataloader.persistent_workers=False', '--out',
        str(out)
    ])
    with open(out / 'elastic_sweep.json') as f:
        rows = json.load(f)['results']
    assert [r['active_cores'] for r in rows] == [8, 64]
    # Random weights on 3 balanced classes: any accuracy, but a real fraction of the val set.
    assert all(0 <= r['top1'] <= 100 and r['latency_ms'] > 0 for r in rows)
    # Three classes: a random classifier's cross-entropy is near log(3), never 0.
    assert all(0.5 < r['cross_entropy'] < 5 for r in rows)
