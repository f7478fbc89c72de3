import os.path as osp

import pytest
import torch
from analysis_tools_loader import load_tool

from mmlinear.visualization import upsample_saliency

visualize_attention = load_tool('visualize_attention')


def test_upsample_and_minmax():
    saliency = torch.tensor([[[0., 1.], [2., 3.]]])
    full = upsample_saliency(saliency, (30, 32))  # patches of 16, cropped
    assert full.shape == (1, 30, 32)
    scaled = visualize_attention.minmax(full)
    assert scaled.min() == 0 and scaled.max() == 1
    assert float(scaled[0, -1, -1]) == pytest.approx(1) and float(scaled[0, 0, 0]) == 0


def test_cli_writes_the_overlay_png(tiny_data, tmp_path):
    out = tmp_path / 'maps.png'
    visualize_attention.main([
        '--models', 'infvit-test-linear', 'infvit-test-pure', 'weightformer-test', 'veca-small',
        '--images',
        osp.join(tiny_data, 'coco', 'images', 'val'), '--max-images', '2', '--img-size', '64',
        '--active-cores', '16', '--query', 'first', '--out',
        str(out)
    ])
    assert out.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    with pytest.raises(SystemExit, match='one entry per model'):
        visualize_attention.main([
            '--models', 'infvit-test-linear', 'infvit-test-pure', '--checkpoints', 'none',
            '--images', 'x'
        ])
    with pytest.raises(SystemExit, match='VECA models only'):
        visualize_attention.main([
            '--models', 'infvit-test-linear', '--active-cores', '16', '--images',
            osp.join(tiny_data, 'coco', 'images', 'val'), '--max-images', '1', '--img-size', '32',
            '--out',
            str(tmp_path / 'x.png')
        ])
    with pytest.raises(ValueError, match='active_cores'):
        visualize_attention.main([
            '--models', 'veca-small', '--active-cores', '12', '--images',
            osp.join(tiny_data, 'coco', 'images', 'val'), '--out',
            str(tmp_path / 'y.png')
        ])
