"""tools/inference/large_image.py with a Mask R-CNN config: a GeoTIFF in, detections out as
COCO JSON (RLE masks) and GeoJSON in the raster's map coordinates (pixels, with a warning,
without a georeference), equal to detect_large_image; refusals before any work."""
import json
import os.path as osp
import warnings

import numpy as np
import pytest
import rasterio
import torch
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from mmdet.apis import init_detector
from pycocotools import mask as mask_util
from pycocotools.coco import COCO
from random_demo_models import save_random_checkpoint
from rasterio.transform import from_origin
from shapely.geometry import shape

from mmlinear.apis import detect_large_image
from mmlinear.apis.rasters import RasterImage

CONFIG = osp.join(REPO_ROOT, 'configs', 'demo',
                  'mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py')
# UTM metres, 0.5 m pixels, and a rotation, so that x and y of a corner both move with both.
TRANSFORM = from_origin(500000.0, 4100000.0, 0.5, 0.5) @ rasterio.Affine.rotation(10)
CLASSES = ('circle', 'square', 'triangle')


@pytest.fixture(scope='module')
def tool():
    return load_tool('large_image', osp.join(REPO_ROOT, 'tools', 'inference'))


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    """The demo Mask R-CNN with its constructors' random weights, saved as a runner saves it."""
    return save_random_checkpoint(CONFIG,
                                  str(tmp_path_factory.mktemp('checkpoint') / 'mask-rcnn.pth'),
                                  dict(classes=CLASSES))


def write_raster(path, height=96, width=128, georeferenced=True):
    rng = np.random.default_rng(0)
    blocks = rng.integers(0, 256, (3, height // 16, width // 16)).astype(np.uint8)
    bands = np.repeat(np.repeat(blocks, 16, 1), 16, 2)
    profile = dict(driver='GTiff', height=height, width=width, count=3, dtype='uint8')
    if georeferenced:
        profile.update(crs='EPSG:32633', transform=TRANSFORM)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # rasterio's NotGeoreferencedWarning
        with rasterio.open(path, 'w', **profile) as dataset:
            dataset.write(bands)
    return str(path)


def expected_detections(source, checkpoint):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = init_detector(CONFIG, checkpoint, device='cpu')
        with RasterImage(source) as image:
            return detect_large_image(model, image, score_thr=0.05).pred_instances


def test_a_geotiff_in_gives_coco_json_and_geojson_in_map_coordinates(tool, checkpoint, tmp_path):
    source = write_raster(tmp_path / 'scene.tif')
    out = tmp_path / 'out'
    result = run_tool_main(tool, source, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 0, result.stderr
    assert 'predicted peak' in result.stdout
    expected = expected_detections(source, checkpoint)
    assert len(expected) > 3 and any(mask_util.area(rle) for rle in expected.masks)
    # COCO JSON: pycocotools reads it; boxes, scores, classes and masks as detected.
    coco = COCO(str(out / 'detections.json'))
    assert [c['name'] for c in coco.loadCats(coco.getCatIds())] == list(CLASSES)
    annotations = coco.loadAnns(coco.getAnnIds())
    assert len(annotations) == len(expected)
    boxes = torch.tensor([a['bbox'] for a in annotations])
    boxes[:, 2:] += boxes[:, :2]
    torch.testing.assert_close(boxes, expected.bboxes)
    assert [a['category_id'] - 1 for a in annotations] == expected.labels.tolist()
    assert [a['segmentation'] for a in annotations] == expected.masks
    assert all(a['area'] == mask_util.area(a['segmentation']) for a in annotations)
    # GeoJSON: the box corners are the raster's transform of the pixel corners, the mask's
    # outline covers its pixels' area in square metres.
    collection = json.loads((out / 'detections.geojson').read_text())
    assert collection['crs']['properties']['name'] == 'EPSG:32633'
    features = collection['features']
    assert len(features) == len(expected)
    for feature, box, rle in zip(features, expected.bboxes.tolist(), expected.masks):
        x1, y1, x2, y2 = box
        corners = [TRANSFORM @ point for point in ((x1, y1), (x2, y1), (x2, y2), (x1, y2))]
        np.testing.assert_allclose(feature['properties']['box_corners'], corners, rtol=1e-12)
        assert feature['properties']['class'] == CLASSES[feature['properties']['label']]
        pixels = int(mask_util.area(rle))
        if pixels:
            assert shape(feature['geometry']).area == pytest.approx(pixels * 0.25, rel=1e-9)
            outline = shape(feature['geometry'])
            centre = TRANSFORM @ ((x1 + x2) / 2, (y1 + y2) / 2)
            assert outline.distance(shape(dict(type='Point', coordinates=centre))) < 50
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['task'] == 'detection' and summary['georeferenced']
    assert sum(summary['detections_per_class']) == len(expected)
    assert sorted(
        p.name for p in out.iterdir()) == ['detections.geojson', 'detections.json', 'summary.json']


def test_without_a_georeference_detections_are_in_pixels_with_a_warning(tool, checkpoint, tmp_path):
    source = write_raster(tmp_path / 'plain.tif', georeferenced=False)
    out = tmp_path / 'out'
    with pytest.warns(UserWarning, match='has no georeference: .*in pixel coordinates'):
        result = run_tool_main(tool, source, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 0, result.stderr
    collection = json.loads((out / 'detections.geojson').read_text())
    assert 'crs' not in collection and collection['features']
    for feature in collection['features']:
        x1, y1, x2, y2 = feature['properties']['box_pixels']
        assert feature['properties']['box_corners'] == [[x1, y1], [x2, y1], [x2, y2], [x1, y2]]


def test_existing_outputs_and_unmeetable_limits_are_refused(tool, checkpoint, tmp_path):
    source = write_raster(tmp_path / 'scene.tif', 64, 64)
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'detections.geojson').write_text('mine')
    result = run_tool_main(tool, source, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 1
    assert 'outputs exist' in result.stderr and 'use --force' in result.stderr
    assert (out / 'detections.geojson').read_text() == 'mine'
    result = run_tool_main(tool, source, CONFIG, checkpoint, '--out', out, '--force',
                           '--mem-limit-gb', '0.000001')
    assert result.returncode == 1 and 'streamed detection needs' in result.stderr
    assert (out / 'detections.geojson').read_text() == 'mine'
    assert run_tool_main(tool, source, CONFIG, checkpoint, '--out', out, '--force').returncode == 0
    assert json.loads((out / 'detections.geojson').read_text())['type'] == 'FeatureCollection'


def test_a_config_of_another_task_is_refused(tool, checkpoint, tmp_path):
    classifier = osp.join(REPO_ROOT, 'configs', 'demo', 'infvit-demo-linear_shapes-cls.py')
    result = run_tool_main(tool, write_raster(tmp_path / 'scene.tif', 64, 64), classifier,
                           checkpoint, '--out', tmp_path / 'out')
    assert result.returncode == 1
    assert 'neither a segmentor config' in result.stderr and 'Mask R-CNN' in result.stderr
    assert not (tmp_path / 'out').exists()


def assert_json_close(actual, expected, path='$'):
    """Equal JSON, numbers to 1e-4."""
    if isinstance(expected, dict):
        assert sorted(actual) == sorted(expected), path
        for key in expected:
            assert_json_close(actual[key], expected[key], f'{path}.{key}')
    elif isinstance(expected, list):
        assert len(actual) == len(expected), path
        for index, (a, e) in enumerate(zip(actual, expected)):
            assert_json_close(a, e, f'{path}[{index}]')
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, abs=1e-4), path
    else:
        assert actual == expected, path


def test_a_folder_of_rasters_gives_each_the_detections_of_a_one_image_run(
        tool, checkpoint, tmp_path):
    folder = tmp_path / 'scenes'
    folder.mkdir()
    write_raster(folder / 'east.tif', 96, 128)
    write_raster(folder / 'west.tif', 64, 160, georeferenced=False)
    out = tmp_path / 'out'
    result = run_tool_main(tool, folder, CONFIG, checkpoint, '--out', out, '--score-thr', '0.0')
    assert result.returncode == 0, result.stderr
    for name in ('east', 'west'):
        single = tmp_path / f'single_{name}'
        assert run_tool_main(tool, folder / f'{name}.tif', CONFIG, checkpoint, '--out', single,
                             '--score-thr', '0.0').returncode == 0
        for output in ('detections.json', 'detections.geojson'):
            batch_result = json.loads((out / name / output).read_text())
            assert_json_close(batch_result, json.loads((single / output).read_text()))
        assert json.loads((out / name / 'detections.json').read_text())['annotations']
    manifest = [json.loads(line) for line in (out / 'manifest.jsonl').read_text().splitlines()]
    assert [r['status'] for r in manifest] == ['done', 'done']
    assert manifest[0]['outputs'][-1] == str(out / 'east' / 'summary.json')
