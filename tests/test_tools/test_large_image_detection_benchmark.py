"""tools/analysis_tools/large_image_detection.py: the scene, its ground truth, the whole-image
method's detections and masks and the report (recall, COCO mAP, time, memory); the sliced
method where SAHI is installed; --cfg-options reaching the whole-image method; existing
outputs refused without --force."""
import importlib.util
import json
import os.path as osp

import numpy as np
import pytest
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from random_demo_models import save_random_checkpoint

CONFIG = osp.join(REPO_ROOT, 'configs', 'demo',
                  'mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py')


@pytest.fixture(scope='module')
def tool():
    return load_tool('large_image_detection')


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    """The demo Mask R-CNN with its constructors' random weights."""
    return save_random_checkpoint(CONFIG,
                                  str(tmp_path_factory.mktemp('checkpoint') / 'mask-rcnn.pth'),
                                  dict(classes=('circle', 'square', 'triangle')))


def run(tool, checkpoint, work_dir, *extra):
    # Random weights score every proposal alike: the caps keep the whole-image method's 4,600
    # detections (mask pasting and COCO matching took most of the test's time) to 100.
    return run_tool_main(tool, CONFIG, checkpoint, '--size', '256', '--tile', '64', '--score-thr',
                         '0', '--rpn-nms-pre', '1000', '--rpn-proposals', '300', '--max-detections',
                         '100', '--work-dir', work_dir, *extra)


@pytest.mark.skipif(
    importlib.util.find_spec('sahi') is not None,
    reason='with SAHI installed, the sliced method is run by the test below')
def test_the_sliced_method_without_sahi_names_the_package(tool, checkpoint, tmp_path):
    result = run(tool, checkpoint, tmp_path / 'out')
    assert result.returncode == 1 and 'pip install sahi' in result.stderr


@pytest.mark.parametrize(
    'methods',
    [
        # where SAHI is installed, the run of both methods checks the whole-image one too
        pytest.param(['whole'],
                     marks=[pytest.mark.slow] if importlib.util.find_spec('sahi') else []),
        pytest.param(['whole', 'sliced'],
                     marks=pytest.mark.skipif(
                         importlib.util.find_spec('sahi') is None, reason='SAHI is not installed'))
    ])
def test_report_of_the_whole_image_method(tool, checkpoint, tmp_path, methods):
    work_dir = tmp_path / 'out'
    result = run(tool, checkpoint, work_dir, '--methods', *methods)
    assert result.returncode == 0, result.stderr
    truth = json.loads((work_dir / 'ground_truth.json').read_text())
    assert np.load(work_dir / 'scene.npy').shape == (256, 256, 3)
    report = json.loads((work_dir / 'report.json').read_text())
    assert report['objects'] == len(truth['boxes']) > 3
    assert 0 < report['crossing_objects'] < report['objects']
    for name in methods:
        row = report['methods'][name]
        detections = json.loads((work_dir / f'detections_{name}.json').read_text())
        assert row['detections'] == len(detections['boxes']) == len(detections['masks']) > 0
        assert all(mask['size'] == [256, 256] for mask in detections['masks'])
        assert 0 <= row['recall_crossing'] <= 1 and 0 <= row['recall'] <= 1
        for kind in ('bbox', 'segm'):
            assert 0 <= row[f'{kind}_mAP'] <= row[f'{kind}_mAP_50'] <= 1
        assert row['seconds'] > 0 and row['peak_bytes'] > 0
    assert '| whole |' in (work_dir / 'report.md').read_text()
    result = run(tool, checkpoint, work_dir, '--methods', *methods)
    assert result.returncode == 1 and 'use --force' in result.stderr


def test_cfg_options_reach_the_whole_image_method(tool, checkpoint, tmp_path):
    work_dir = tmp_path / 'out'
    # no score reaches the threshold: the whole-image method finds nothing
    result = run(tool, checkpoint, work_dir, '--methods', 'whole', '--cfg-options',
                 'model.test_cfg.rcnn.score_thr=1.0')
    assert result.returncode == 0, result.stderr
    report = json.loads((work_dir / 'report.json').read_text())
    assert report['cfg_options'] == {'model.test_cfg.rcnn.score_thr': 1.0}
    row = report['methods']['whole']
    assert row['detections'] == 0 and row['bbox_mAP'] == row['segm_mAP'] == 0.0
