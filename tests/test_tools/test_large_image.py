"""tools/inference/large_image.py: a GeoTIFF in, a class-map GeoTIFF out that keeps its
georeference and equals segment_large_image, and every refusal before any work."""
import json
import os.path as osp
import warnings

import numpy as np
import pytest
import rasterio
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from mmengine.config import Config
from mmseg.apis import init_model
from random_demo_models import save_random_checkpoint
from rasterio.crs import CRS
from rasterio.transform import from_origin

from mmlinear.apis import segment_large_image
from mmlinear.apis.rasters import RasterImage

CONFIG = osp.join(REPO_ROOT, 'configs', 'demo', 'upernet_infvit-demo-linear_shapes-ade.py')
TRANSFORM = from_origin(500000.0, 4100000.0, 0.5, 0.5)  # UTM metres, 0.5 m pixels


@pytest.fixture(scope='module')
def tool():
    return load_tool('large_image', osp.join(REPO_ROOT, 'tools', 'inference'))


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    """The demo UperNet with its constructors' random weights, saved as a runner saves it."""
    cfg = Config.fromfile(CONFIG)
    return save_random_checkpoint(CONFIG,
                                  str(tmp_path_factory.mktemp('checkpoint') / 'upernet.pth'),
                                  dict(classes=cfg.classes, palette=cfg.palette))


def write_raster(path, channels, crs='EPSG:32633', transform=TRANSFORM):
    count, height, width = channels.shape
    profile = dict(driver='GTiff', height=height, width=width, count=count, dtype=channels.dtype)
    if crs is not None:
        profile.update(crs=crs, transform=transform)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # rasterio's NotGeoreferencedWarning
        with rasterio.open(path, 'w', **profile) as dataset:
            dataset.write(channels)
    return str(path)


def scene_channels(height=88, width=120, count=3, dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (count, -(-height // 8), -(-width // 8))).astype(dtype)
    return np.repeat(np.repeat(blocks, 8, 1), 8, 2)[:, :height, :width].copy()


def test_a_geotiff_in_gives_a_georeferenced_class_map_out(tool, checkpoint, tmp_path):
    source = write_raster(tmp_path / 'scene.tif', scene_channels())
    out = tmp_path / 'out'
    result = run_tool_main(tool, source, CONFIG, checkpoint, '--out', out, '--probabilities')
    assert result.returncode == 0, result.stderr
    assert 'predicted peak' in result.stdout
    with rasterio.open(out / 'class_map.tif') as dataset:
        assert dataset.crs == CRS.from_string('EPSG:32633')
        assert dataset.transform == TRANSFORM
        assert dataset.profile['tiled'] and dataset.count == 1
        class_map = dataset.read(1)
    with rasterio.open(out / 'probabilities.tif') as dataset:
        assert dataset.count == 4 and dataset.crs == CRS.from_string('EPSG:32633')
        probabilities = dataset.read()
    np.testing.assert_allclose(probabilities.sum(0), 1, rtol=1e-5)
    np.testing.assert_array_equal(probabilities.argmax(0), class_map)
    # The same classes as segment_large_image on the raster's rows.
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = init_model(CONFIG, checkpoint, device='cpu')
    with RasterImage(source) as image:
        np.testing.assert_array_equal(segment_large_image(model, image).numpy(), class_map)
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['georeferenced'] and summary['shape'] == [88, 120, 3]
    assert sum(summary['pixels_per_class']) == 88 * 120
    assert summary['predicted_peak_gb'] > 0 and summary['peak_rss_gb'] > 0
    # the image's own peak, without the weights and the interpreter that the RSS holds
    assert 0 <= summary['peak_memory_gb'] < summary['peak_rss_gb']
    assert sorted(p.name
                  for p in out.iterdir()) == ['class_map.tif', 'probabilities.tif', 'summary.json']


def test_existing_outputs_are_refused_without_force(tool, checkpoint, tmp_path):
    source = write_raster(tmp_path / 'scene.tif', scene_channels(64, 64))
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'class_map.tif').write_bytes(b'mine')
    result = run_tool_main(tool, source, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 1
    assert 'outputs exist' in result.stderr and 'use --force' in result.stderr
    assert (out / 'class_map.tif').read_bytes() == b'mine'
    assert run_tool_main(tool, source, CONFIG, checkpoint, '--out', out, '--force').returncode == 0
    with rasterio.open(out / 'class_map.tif') as dataset:
        assert dataset.shape == (64, 64)


def test_a_missing_georeference_is_a_warning(tool, checkpoint, tmp_path):
    source = write_raster(tmp_path / 'plain.tif', scene_channels(64, 72), crs=None)
    out = tmp_path / 'out'
    with pytest.warns(UserWarning, match='has no georeference: the outputs are written without'):
        result = run_tool_main(tool, source, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 0
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        with rasterio.open(out / 'class_map.tif') as dataset:
            assert dataset.crs is None and dataset.shape == (64, 72)


def test_bad_inputs_are_refused_before_any_work(tool, checkpoint, tmp_path):
    out = tmp_path / 'out'
    four_channels = write_raster(tmp_path / 'four.tif', scene_channels(64, 64, 4, np.uint16))
    result = run_tool_main(tool, four_channels, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 1
    assert 'takes images of 3 channels, the image has 4' in result.stderr
    truncated = tmp_path / 'truncated.tif'
    source = write_raster(tmp_path / 'whole.tif', scene_channels(64, 64))
    truncated.write_bytes(open(source, 'rb').read()[:200])
    result = run_tool_main(tool, truncated, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 1 and 'truncated.tif' in result.stderr
    result = run_tool_main(tool, tmp_path / 'none.tif', CONFIG, checkpoint, '--out', out)
    assert result.returncode == 1 and "no image file '" in result.stderr
    result = run_tool_main(tool, source, CONFIG, checkpoint, '--out', out, '--mem-limit-gb',
                           '0.000001')
    assert result.returncode == 1 and 'streamed segmentation needs' in result.stderr
    assert not out.exists()


def test_context_window_option_equals_segment_large_image_with_it(tool, checkpoint, tmp_path):
    """--context-window 4 (cells of the stride-16 top level) and --cfg-options
    model.decode_head.context_window=4 give segment_large_image's classes with that window,
    'whole' (either way) those of the whole image's pooling over the config's window of 8;
    a non-positive, three-number or unknown window is refused before any output."""
    source = write_raster(tmp_path / 'scene.tif', scene_channels(160, 136))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = init_model(CONFIG, checkpoint, device='cpu')
    with RasterImage(source) as image:
        expected = {
            window: segment_large_image(model, image, context_window=window).numpy()
            for window in (4, 'whole')
        }
    assert (expected[4] != expected['whole']).any()
    options = [
        (4, ['--context-window', '4']),
        (4, ['--cfg-options', 'model.decode_head.context_window=4']),
        ('whole', ['--context-window', 'whole']),
        ('whole', ['--cfg-options', 'model.decode_head.context_window=whole']),
    ]
    for window, option in options:
        out = tmp_path / f'{option[0].strip("-")}-{window}'
        result = run_tool_main(tool, source, CONFIG, checkpoint, '--out', out, *option)
        assert result.returncode == 0, result.stderr
        with rasterio.open(out / 'class_map.tif') as dataset:
            np.testing.assert_array_equal(dataset.read(1), expected[window])
    for bad, message in ((['0'], "context_window must be None or 'whole'"),
                         (['all'], "context_window must be None or 'whole'"),
                         (['4', '4', '4'], '--context-window takes one or two sizes')):
        out = tmp_path / 'bad'
        result = run_tool_main(tool, source, CONFIG, checkpoint, '--out', out, '--context-window',
                               *bad)
        assert result.returncode == 1 and message in result.stderr
        assert not out.exists()
