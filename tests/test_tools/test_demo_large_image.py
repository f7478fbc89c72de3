"""tools/misc/demo_large_image.py on a small generated scene with a randomly initialised demo
UperNet: both class maps keep the scene's georeference, the figures are those of the written
maps, and a scene that does not fit is refused before any work."""
import json
import os.path as osp
import warnings

import numpy as np
import pytest
import rasterio
import torch
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.runner import save_checkpoint
from mmseg.apis import init_model
from PIL import Image

from mmlinear.apis import segment_large_image
from mmlinear.apis.channel_view import ChannelView
from mmlinear.apis.class_map_iou import class_map_iou
from mmlinear.apis.rasters import RasterImage

MISC = osp.join(REPO_ROOT, 'tools', 'misc')
CONFIG = osp.join(REPO_ROOT, 'configs', 'demo', 'upernet_infvit-demo-linear_shapes-ade.py')


@pytest.fixture(scope='module')
def demo():
    return load_tool('demo_large_image', MISC)


@pytest.fixture(scope='module')
def make_scene():
    datasets = load_tool('make_tiny_datasets', MISC)

    def make(root, size, kind='mosaic'):
        return datasets.make_large_scene(str(root), size, kind, seed=3)

    return make


def random_upernet():
    cfg = Config.fromfile(CONFIG)
    cfg.model.backbone.init_cfg = None
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return cfg, init_model(cfg, None, device='cpu')


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    """The demo UperNet with its constructors' random weights, saved as a runner saves it."""
    cfg, model = random_upernet()
    path = str(tmp_path_factory.mktemp('checkpoint') / 'upernet.pth')
    meta = dict(dataset_meta=dict(classes=cfg.classes, palette=cfg.palette))
    save_checkpoint(dict(meta=meta, state_dict=model.state_dict()), path)
    return path


def test_the_demo_writes_georeferenced_class_maps_their_miou_and_the_picture(
        demo, make_scene, checkpoint, tmp_path):
    scene, labels = make_scene(tmp_path / 'data', 256)
    work_dir = tmp_path / 'work'
    result = run_tool_main(demo, scene, labels, '--checkpoint', checkpoint, '--work-dir', work_dir,
                           '--zoom', 96)
    assert result.returncode == 0, result.stderr
    (out, ) = work_dir.iterdir()  # one timestamped folder per run
    assert sorted(p.name for p in out.iterdir()) == [
        'class_map_slide.tif', 'class_map_whole.tif', 'comparison.png', 'summary.json'
    ]
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['shape'] == [256, 256, 4] and summary['dtype'] == 'uint16'
    assert summary['georeferenced'] and summary['model_channels'] == [2, 1, 0]
    with rasterio.open(scene) as source:
        crs, transform = source.crs, source.transform
    with RasterImage(labels) as label_map:
        for name in ('whole', 'slide'):
            with rasterio.open(out / f'class_map_{name}.tif') as written:
                assert written.crs == crs and written.transform == transform
                assert written.shape == (256, 256) and written.count == 1
                class_map = written.read(1)
            run = summary['runs'][name]
            # The figures are those of the written map against the labels.
            expected = class_map_iou(class_map, label_map, 4)
            assert run['mIoU'] == pytest.approx(expected['mIoU'])
            np.testing.assert_allclose(run['IoU'], expected['IoU'])
            assert run['seconds'] > 0 and run['peak_memory_gb'] >= 0
            assert f'| {name} | ' in result.stdout
    # The whole run is segment_large_image on the scene's B, G, R channels scaled to 8 bits.
    _, model = random_upernet()
    with RasterImage(scene) as image:
        whole = segment_large_image(model, ChannelView(image, (2, 1, 0), 255 / 65535))
    with rasterio.open(out / 'class_map_whole.tif') as written:
        np.testing.assert_array_equal(written.read(1), whole.numpy())
    with Image.open(out / 'comparison.png') as picture:
        assert picture.format == 'PNG' and picture.width > picture.height > 300


def test_config_options_reach_the_model_and_one_mode_runs_alone(demo, make_scene, checkpoint,
                                                                tmp_path):
    """``--modes whole --cfg-options model.backbone.pos_extrapolation=tile`` on the continuous
    scene: the one run is segment_large_image with the tiled position table."""
    scene, labels = make_scene(tmp_path / 'data', 256, 'continuous')
    work_dir = tmp_path / 'work'
    result = run_tool_main(demo, scene, labels, '--checkpoint', checkpoint, '--work-dir', work_dir,
                           '--modes', 'whole', '--cfg-options',
                           'model.backbone.pos_extrapolation=tile')
    assert result.returncode == 0, result.stderr
    (out, ) = work_dir.iterdir()
    assert sorted(
        p.name for p in out.iterdir()) == ['class_map_whole.tif', 'comparison.png', 'summary.json']
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['cfg_options'] == {'model.backbone.pos_extrapolation': 'tile'}
    assert list(summary['runs']) == ['whole'] and '| slide | ' not in result.stdout
    _, model = random_upernet()
    model.backbone.pos_extrapolation = 'tile'
    with RasterImage(scene) as image:
        whole = segment_large_image(model, ChannelView(image, (2, 1, 0), 255 / 65535))
    with rasterio.open(out / 'class_map_whole.tif') as written:
        np.testing.assert_array_equal(written.read(1), whole.numpy())


def test_a_scene_that_does_not_fit_the_demo_is_refused(demo, make_scene, checkpoint, tmp_path):
    scene, _ = make_scene(tmp_path / 'a', 256)
    _, other_labels = make_scene(tmp_path / 'b', 128)
    work_dir = tmp_path / 'work'
    result = run_tool_main(demo, scene, other_labels, '--checkpoint', checkpoint, '--work-dir',
                           work_dir)
    assert result.returncode == 1
    assert 'must be one channel of the scene\'s size 256 x 256' in result.stderr
    result = run_tool_main(demo, tmp_path / 'missing.tif', other_labels, '--checkpoint', checkpoint,
                           '--work-dir', work_dir)
    assert result.returncode == 1 and 'no raster file' in result.stderr
    result = run_tool_main(demo, scene, other_labels, '--checkpoint', checkpoint, '--work-dir',
                           work_dir, '--stride', '0', '85')
    assert result.returncode == 2
    assert 'argument --stride: must be a positive integer, got 0' in result.stderr
    assert not work_dir.exists()
