"""benchmark_relation.py: every variant it names, the InfSA ones and the efficient-attention
baselines, and every dynamic-block frequency of the demo WeightFormer, trains on the relational
split and is reported."""
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


def test_weightformer_points_train_with_their_dynamic_blocks(tiny_data, tmp_path):
    points = ['all', 'every-3', 'none']
    result = run_tool_main(tool, '--data', osp.join(tiny_data, 'relation'), '--out', tmp_path,
                           '--weightformer-dynamic', *points, '--epochs', '1', '--batch-size', '16')
    assert result.returncode == 0, result.stderr
    with open(tmp_path / 'results.json') as f:
        results = json.load(f)
    names = [f'dynamic {point}' for point in points]
    assert list(results['curves']) == names
    for curve in results['curves'].values():
        assert len(curve) == 1 and 0 <= curve[0] <= 1
    # A dynamic block has more parameters than a static one: all > every-3 (2 of 5) > none.
    params = [results['params'][name] for name in names]
    assert params[0] > params[1] > params[2]
    for name in names:
        assert name in result.stdout


def test_unknown_frequency_names_the_allowed_ones(tiny_data, tmp_path):
    result = run_tool_main(tool, '--data', osp.join(tiny_data, 'relation'), '--out', tmp_path,
                           '--weightformer-dynamic', 'every-5')
    assert result.returncode == 2
    assert "invalid choice: 'every-5'" in result.stderr and "'every-4'" in result.stderr


def test_attention_variants_and_weightformer_points_are_not_mixed(tiny_data, tmp_path):
    result = run_tool_main(tool, '--data', osp.join(tiny_data, 'relation'), '--out', tmp_path,
                           '--variants', 'none', '--weightformer-dynamic', 'none')
    assert result.returncode == 2
    assert 'not allowed with argument' in result.stderr
