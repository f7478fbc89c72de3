import os.path as osp

import pytest
from analysis_tools_loader import load_tool

visualize_attention = load_tool('visualize_attention')


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
