"""benchmark_relation.py: every variant it names, the InfSA ones and the efficient-attention
baselines, and every dynamic-block frequency of the demo WeightFormer, trains on the relational
split and is reported."""
import json
import os.path as osp

import pytest
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


def test_dynamic_blocks_per_frequency_count_from_the_second_block():
    assert tool.dynamic_indices('all', 5) == [0, 1, 2, 3, 4]
    assert tool.dynamic_indices('every-2', 5) == [1, 3]
    # The released WeightFormer-T pattern (17 blocks) and its demo body (5 blocks).
    assert tool.dynamic_indices('every-3', 17) == [1, 4, 7, 10, 13, 16]
    assert tool.dynamic_indices('every-3', 5) == [1, 4]
    assert tool.dynamic_indices('every-4', 17) == [1, 5, 9, 13]
    assert tool.dynamic_indices('none', 5) == []
    assert tuple(tool.weightformer_body('every-2').dynamic_indices) == (1, 3)


def test_unknown_frequency_names_the_allowed_ones(tiny_data, tmp_path):
    with pytest.raises(ValueError, match="'every-5'.*all, every-2, every-3, every-4, none"):
        tool.dynamic_indices('every-5', 5)
    result = run_tool_main(tool, '--data', osp.join(tiny_data, 'relation'), '--out', tmp_path,
                           '--weightformer-dynamic', 'every-5')
    assert result.returncode == 2
    assert "invalid choice: 'every-5'" in result.stderr and "'every-4'" in result.stderr


def test_attention_variants_and_weightformer_points_are_not_mixed(tiny_data, tmp_path):
    result = run_tool_main(tool, '--data', osp.join(tiny_data, 'relation'), '--out', tmp_path,
                           '--variants', 'none', '--weightformer-dynamic', 'none')
    assert result.returncode == 2
    assert 'not allowed with argument' in result.stderr
