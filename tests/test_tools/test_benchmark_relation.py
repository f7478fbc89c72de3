"""benchmark_relation.py: every variant it names, the InfSA ones and the efficient-attention
baselines, trains on the relational split and is reported."""
import json
import os.path as osp

from analysis_tools_loader import load_tool, run_tool_main

tool = load_tool('benchmark_relation')


def test_baselines_train_and_are_reported_beside_the_control(tiny_data, tmp_path):
    variants = ['none', 'performer', 'nystromformer', 'agent']
    result = run_tool_main(tool, '--data', osp.join(tiny_data, 'relation'), '--out', tmp_path,
                           '--variants', *variants, '--epochs', '1', '--batch-size', '16')
    assert result.returncode == 0, result.stderr
    with open(tmp_path / 'results.json') as f:
        results = json.load(f)
    assert list(results['curves']) == variants
    for curve in results['curves'].values():
        assert len(curve) == 1 and 0 <= curve[0] <= 1
    assert osp.isfile(tmp_path / 'curves.png')
    for name in ('none (no mixing)', 'performer', 'nystromformer', 'agent'):
        assert name in result.stdout


def test_unknown_variant_names_the_allowed_ones(tiny_data, tmp_path):
    result = run_tool_main(tool, '--data', osp.join(tiny_data, 'relation'), '--out', tmp_path,
                           '--variants', 'flash')
    assert result.returncode == 2
    assert "invalid choice: 'flash'" in result.stderr and "'nystromformer'" in result.stderr
