"""The command line of tools/analysis_tools/eval_attention_quality.py; its metrics are tested
with :mod:`mmlinear.evaluation.attention_quality` (tests/test_evaluation)."""
import json
import os.path as osp

import numpy as np
import pytest
from analysis_tools_loader import load_tool, run_tool_main

quality = load_tool('eval_attention_quality')


def test_cli_on_the_bundled_coco_boxes(tiny_data, tmp_path):
    out = tmp_path / 'quality'
    quality.main([
        'configs/demo/infvit-demo-linear_shapes-cls.py', '--images',
        osp.join(tiny_data, 'coco', 'images', 'val'), '--boxes',
        osp.join(tiny_data, 'coco', 'annotations', 'instances_val.json'), '--max-images', '4',
        '--img-size', '64', '--steps', '4', '--batch-size', '2', '--out',
        str(out)
    ])
    with open(out / 'quality.json') as f:
        result = json.load(f)
    summary = result['summary']
    assert len(result['per_image']) == 4
    assert summary['bbox_roc_auc_images'] == 4
    for key in ('morf_aoc', 'lerf_aoc', 'bbox_roc_auc', 'bbox_pr_auc'):
        values = [r[key] for r in result['per_image']]
        assert summary[key] == pytest.approx(np.mean(values) * (100 if 'bbox' in key else 1))
    assert all(0 <= r['bbox_roc_auc'] <= 1 for r in result['per_image'])
    assert [len(c) for c in result['mean_curves'].values()] == [5, 5]
    assert (out / 'curves.png').read_bytes()[:4] == b'\x89PNG'


def quality_args(tiny_data, config, out, *extra):
    return [
        config, '--images',
        osp.join(tiny_data, 'coco', 'images', 'val'), '--boxes',
        osp.join(tiny_data, 'coco', 'annotations', 'instances_val.json'), '--max-images', '3',
        '--img-size', '64', '--steps', '4', '--batch-size', '2', '--out',
        str(out), *extra
    ]


def test_a_model_without_attention_needs_the_random_baseline(tiny_data, tmp_path):
    none = 'configs/demo/infvit-demo-none_shapes-cls.py'
    refused = run_tool_main(quality, *quality_args(tiny_data, none, tmp_path / 'attention'))
    assert refused.returncode == 1
    assert "builds attn_type 'none'" in refused.stderr
    assert 'allowed --saliency: attention, random' in refused.stderr
    assert not (tmp_path / 'attention').exists()

    def scores(out, seed):
        run = run_tool_main(
            quality, *quality_args(tiny_data, none, out, '--saliency', 'random', '--seed', seed))
        assert run.returncode == 0, run.stderr
        assert 'random patch order' in run.stdout
        with open(out / 'quality.json') as f:
            return json.load(f)['per_image']

    first = scores(tmp_path / 'a', 0)
    # Seeded: the initial weights and the random order repeat; another seed changes both.
    assert scores(tmp_path / 'b', 0) == first
    assert scores(tmp_path / 'c', 1) != first
    assert len(first) == 3 and all(0 <= r['bbox_roc_auc'] <= 1 for r in first)
