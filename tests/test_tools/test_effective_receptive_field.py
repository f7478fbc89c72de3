"""tools/analysis_tools/effective_receptive_field.py on a few generated images."""
import json
import os.path as osp

import numpy as np
import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from PIL import Image

from mmlinear.visualization import build_featmap_backbone

tool = load_tool('effective_receptive_field')
DEMO = osp.join(REPO_ROOT, 'configs', 'demo')
# The demo classifiers at their 'test' size (the DeiT's arch is a dict, as mmpretrain takes it).
TEST_ARCHS = {
    'weightformer-demo_shapes-cls':
    "'test'",
    'deit-demo_shapes-cls':
    'dict(embed_dims=32, num_layers=2, num_heads=2, '
    'feedforward_channels=64)',
}


@pytest.fixture
def configs(tmp_path):
    paths = []
    for name, arch in TEST_ARCHS.items():
        path = tmp_path / f'{name}.py'
        path.write_text(f"_base_ = ['{DEMO}/{name}.py']\n"
                        f'model = dict(backbone=dict(arch={arch}), head=dict(in_channels=32))\n')
        paths.append(str(path))
    return paths


@pytest.fixture
def image_dir(tmp_path):
    folder = tmp_path / 'images'
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        pixels = rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f'{i}.png')
    return str(folder)


def seeded_backbone_checkpoint(config, path):
    """A checkpoint holding, under 'backbone.', the initial weights the tool builds."""
    torch.manual_seed(0)
    backbone = build_featmap_backbone(config, None)
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in backbone.state_dict().items()}}, path)
    return str(path)


def run(configs, image_dir, out, *extra):
    return run_tool_main(tool, *configs, '--images', image_dir, '--img-size', 32, '--batch-size', 2,
                         '--out', out, *extra)


def test_writes_area_ratios_and_the_grid_of_maps(configs, image_dir, tmp_path):
    weightformer, deit = configs
    checkpoint = seeded_backbone_checkpoint(weightformer, tmp_path / 'wf.pth')
    out = tmp_path / 'erf'
    result = run(configs, image_dir, out, '--checkpoints', checkpoint, 'none', '--thresholds', 0.2,
                 0.5, 0.99)
    assert result.returncode == 0, result.stderr
    saved = json.loads((out / 'erf.json').read_text())
    assert saved['images'] == 3
    results = saved['results']
    assert set(results) == {'weightformer-demo_shapes-cls', 'deit-demo_shapes-cls'}
    assert set(results['weightformer-demo_shapes-cls']) == {'initial', 'trained'}
    assert set(results['deit-demo_shapes-cls']) == {'initial'}  # 'none': no trained weights
    for by_weights in results.values():
        for entry in by_weights.values():
            assert entry['map_size'] == [32, 32]
            ratios = [entry['area_ratio'][t] for t in ('0.2', '0.5', '0.99')]
            assert ratios == sorted(ratios) and 0 < ratios[0] and ratios[-1] <= 1
    initial, trained = (results['weightformer-demo_shapes-cls'][w] for w in ('initial', 'trained'))
    assert trained['checkpoint'] == checkpoint and initial['checkpoint'] is None
    # The checkpoint holds the seeded initial weights: loading it changes nothing.
    assert trained['area_ratio'] == initial['area_ratio']
    # A progress line per batch (2 of 2 and 1 images) and model weights, three of them.
    assert '[6/6] deit-demo_shapes-cls initial: 3/3 images' in result.stdout
    assert 'weightformer-demo_shapes-cls trained: area ratio 20%' in result.stdout
    assert (out / 'erf.png').read_bytes()[:4] == b'\x89PNG'


def test_bad_input_is_refused_before_anything_is_written(configs, image_dir, tmp_path):
    weightformer, deit = configs
    out = tmp_path / 'erf'

    def refused(*args):
        result = run(*args)
        assert result.returncode == 1 and not out.exists()
        return result.stderr

    assert 'no image or folder at' in refused(configs, str(tmp_path / 'missing'), out)
    empty = tmp_path / 'empty'
    empty.mkdir()
    assert 'no images (.png' in refused(configs, str(empty), out)
    assert '--checkpoints needs one entry per model (2), got 1' in refused(
        configs, image_dir, out, '--checkpoints', 'none')
    # The WeightFormer's backbone is not the DeiT's: both are named.
    other = seeded_backbone_checkpoint(weightformer, tmp_path / 'wf.pth')
    message = refused([deit], image_dir, out, '--checkpoints', other)
    assert f'{other} does not hold the backbone of {deit}' in message
    assert 'checkpoint not found: nowhere.pth' in refused([deit], image_dir, out, '--checkpoints',
                                                          'nowhere.pth')
    assert '--img-size 4 is smaller than one patch of deit-demo_shapes-cls (8 px)' in refused(
        [deit], image_dir, out, '--img-size', 4)
    assert '--thresholds must be shares in (0, 1], got [1.5]' in refused([deit], image_dir, out,
                                                                         '--thresholds', 0.5, 1.5)
