"""tools/analysis_tools/spectral_alignment.py on the bundled images."""
import json
import os.path as osp

import numpy as np
import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from mmengine.config import Config

from mmlinear.apis import build_classifier

tool = load_tool('spectral_alignment')
CONFIG = osp.join(REPO_ROOT, 'configs/demo/infvit-demo-linear_shapes-cls.py')


def run(tiny_data, tmp_path, config=CONFIG, *extra):
    return run_tool_main(tool, config, '--images', osp.join(tiny_data, 'cls', 'val'),
                         '--max-images', '3', '--img-size', '64', '--batch-size', '2', '--out',
                         tmp_path / 'spectral', *extra)


def test_cli_writes_every_layer_and_head_and_their_means(tiny_data, tmp_path):
    result = run(tiny_data, tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / 'spectral'
    with open(out / 'alignment.json') as f:
        saved = json.load(f)
    assert saved['images'] == 3
    per_head = saved['per_head']
    assert set(per_head) == {*tool.METRICS, 'defined'}
    heads = len(per_head['spearman'][0])
    assert len(per_head['spearman']) == 4 and heads > 1
    defined = np.asarray(per_head['defined'])
    assert defined.shape == (4, heads) and ((defined >= 0) & (defined <= 3)).all()
    for metric in tool.METRICS:
        values = np.asarray(per_head[metric], dtype=float)
        assert values.shape == (4, heads)
        assert np.isnan(values).tolist() == (defined == 0).tolist()
        assert saved['mean'][metric] == pytest.approx(np.nanmean(values))
    left_out = int(12 * heads - defined.sum())
    assert f'left out: {left_out} of {12 * heads}' in result.stdout
    assert 'a uniform vector' in result.stdout and 'layer 4:' in result.stdout
    assert (out / 'alignment.png').read_bytes()[:4] == b'\x89PNG'


def test_a_backbone_without_the_infsa_operator_is_refused(tiny_data, tmp_path):
    config = osp.join(REPO_ROOT, 'configs/demo/weightformer-demo_shapes-cls.py')
    result = run(tiny_data, tmp_path, config)
    assert result.returncode == 1
    assert "attn_type in ('linear', 'pure'), got WeightFormer" in result.stderr


def test_a_checkpoint_trained_with_another_attention_type_is_refused(tiny_data, tmp_path):
    cfg = Config.fromfile(CONFIG)
    cfg.model.backbone.attn_type = 'softmax'
    checkpoint = str(tmp_path / 'softmax.pth')
    torch.save(
        dict(state_dict=build_classifier(cfg).state_dict(), meta=dict(cfg=cfg.pretty_text)),
        checkpoint)
    result = run(tiny_data, tmp_path, CONFIG, '--checkpoint', checkpoint)
    assert result.returncode == 1
    assert "trained with attn_type 'softmax', but" in result.stderr and "builds 'linear'" in \
        result.stderr
    assert not (tmp_path / 'spectral').exists()  # refused before writing anything
    # A training config that leaves attn_type to InfViT's default ('linear') is no mismatch.
    cfg.model.backbone.attn_type = 'linear'
    linear = build_classifier(cfg)
    cfg.model.backbone.pop('attn_type')
    torch.save(dict(state_dict=linear.state_dict(), meta=dict(cfg=cfg.pretty_text)), checkpoint)
    assert run(tiny_data, tmp_path, CONFIG, '--checkpoint', checkpoint).returncode == 0
