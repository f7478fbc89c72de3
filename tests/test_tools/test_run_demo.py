"""tools/misc/run_demo.py: each test metric is printed beside its target, and a missed target
makes the demo exit non-zero, naming it (checked on made-up metrics, without training)."""
import json
import math
import os.path as osp
import re
import subprocess
import sys
from typing import Dict, Optional

import pytest
from analysis_tools_loader import load_tool
from conftest import REPO_ROOT

import mmlinear.cli.demo as demo_plan

run_demo = load_tool('run_demo', osp.join(REPO_ROOT, 'tools', 'misc'))
# The figures the README's demo table reports as measured (mAcc, which it omits, made up).
MEASURED = {
    'accuracy/top1': 100.0,
    'coco/bbox_mAP': 0.960,
    'coco/bbox_mAP_50': 1.0,
    'coco/segm_mAP': 0.916,
    'coco/segm_mAP_50': 1.0,
    'mIoU': 96.8,
    'mAcc': 97.9,
    'aAcc': 99.6,
    'IoU.background': 99.6,
    'IoU.circle': 97.1,
    'IoU.square': 96.0,
    'IoU.triangle': 94.5,
}
# The end of an mmseg test log, as its IoUMetric writes the per-class table.
SEG_TEST_LOG = """\
12/02 16:01:10 - mmengine - INFO - Load checkpoint from w/iter_450.pth
12/02 16:01:19 - mmengine - INFO - per class results:
12/02 16:01:19 - mmengine - INFO -
+------------+-------+-------+
|   Class    |  IoU  |  Acc  |
+------------+-------+-------+
| background | 99.6  | 99.81 |
|   circle   | 97.1  | 98.3  |
|   square   |  96.0 | 97.77 |
|  triangle  | 94.5  | 96.02 |
+------------+-------+-------+
12/02 16:01:19 - mmengine - INFO - Iter(test) [60/60]    aAcc: 99.6000  mIoU: 96.8000
"""


def results(changes: Optional[Dict[str, float]] = None) -> list:
    """The demo's (demo, metrics, seconds) triples, from ``MEASURED`` updated by ``changes``."""
    metrics = dict(MEASURED, **(changes or {}))
    return [(demo, {
        k: v
        for k, v in metrics.items()
        if k in demo.metrics or (demo.reports_class_iou and k.startswith('IoU.'))
    }, 60.0) for demo in demo_plan.DEMOS]


def test_targets_are_those_of_the_readme_demo_table():
    with open(osp.join(REPO_ROOT, 'README.md')) as f:
        lines = f.read().splitlines()
    header = next(line for line in lines if line.startswith('| toolbox | model |'))
    column = [cell.strip() for cell in header.split('|')].index('target')
    rows = {
        line.split('|')[1].strip(): line.split('|')[column]
        for line in lines if line.startswith(('| mmpretrain |', '| mmdet |', '| mmseg |'))
    }
    scopes = {
        'accuracy/top1': 'mmpretrain',
        'coco/bbox_mAP': 'mmdet',
        'coco/segm_mAP': 'mmdet',
        'mIoU': 'mmseg'
    }
    stated = {}
    for target in demo_plan.TARGETS:
        stated.setdefault(scopes[target.key], []).append(target.minimum)
    stated['mmseg'].append(demo_plan.CLASS_IOU_MINIMUM)  # the cell reads "90, each class 80"
    assert {
        scope: [float(v) for v in re.findall(r'[\d.]+', cell)]
        for scope, cell in rows.items()
    } == stated
    reported = {key for demo in demo_plan.DEMOS for key in demo.metrics}
    assert {target.key for target in demo_plan.TARGETS} <= reported


def test_met_targets_are_printed_beside_their_metrics(capsys):
    # A metric exactly at its target meets it.
    run_demo.summarise(results({'coco/segm_mAP': 0.85}), 300.0, 'work_dirs/demo')
    out = capsys.readouterr().out
    assert 'accuracy/top1 100.000 (target >= 95)' in out
    assert 'coco/bbox_mAP 0.960 (target >= 0.9), coco/bbox_mAP_50 1.000,' in out
    assert 'mIoU 96.800 (target >= 90), mAcc 97.900, aAcc 99.600' in out
    # Each class's IoU on a line of its own, after the segmenter's metrics.
    seg = out[out.index('semantic segmentation'):]
    classes = {'background': '99.600', 'circle': '97.100', 'square': '96.000', 'triangle': '94.500'}
    expected = [[f'IoU.{name}', value, '(target', '>=', '80)'] for name, value in classes.items()]
    assert [line.split() for line in seg.splitlines()[1:5]] == expected
    assert ('top-1 100.000 (target >= 95), bbox mAP 0.960 (target >= 0.9), segm mAP 0.850 '
            '(target >= 0.85), mIoU 96.800 (target >= 90)') in out
    assert out.rstrip().endswith('All demo targets met.')


# ((metric, changed value) pairs, what the demo names as missed)
MISSES = [
    ([('coco/bbox_mAP', 0.899)], 'bbox mAP 0.899 < 0.9'),
    ([('accuracy/top1', 94.0), ('mIoU', 89.9)], 'top-1 94.000 < 95; mIoU 89.900 < 90'),
    ([('coco/segm_mAP', math.nan)], 'segm mAP nan < 0.85'),
    # The Intel run the targets came from: a fair mIoU without the triangle.
    ([('mIoU', 69.97), ('IoU.triangle', 0.12)], 'mIoU 69.970 < 90; IoU.triangle 0.120 < 80'),
    # A class exactly at its target meets it; one in neither labels nor predictions misses.
    ([('IoU.circle', 80.0), ('IoU.square', math.nan)], 'IoU.square nan < 80'),
]


@pytest.mark.parametrize('changes, missed', MISSES)
def test_a_missed_target_stops_the_demo_naming_it(capsys, changes, missed):
    with pytest.raises(SystemExit) as stop:
        run_demo.summarise(results(dict(changes)), 300.0, 'work_dirs/demo')
    assert stop.value.code == f'demo targets missed: {missed}'
    # The figures and the total are printed before it stops.
    assert 'Total 300 s' in capsys.readouterr().out


MACHINE = dict(
    date='2026-12-04 23:16:30 UTC',
    python='3.11.7',
    torch='2.14.1',
    cpu='Intel(R) Xeon(R) Processor',
    kernel_isa='AVX2 (ONEDNN_MAX_CPU_ISA=AVX2)',
    cpu_count=2,
    load_average=[0.2, 1.0, 1.5],
    load_average_end=[2.0, 1.9, 1.7])


def test_the_summary_names_the_machine_its_figures_were_measured_on(capsys):
    run_demo.summarise(results(), 300.0, 'work_dirs/demo', machine=MACHINE)
    out = capsys.readouterr().out
    assert ('Measured on Intel(R) Xeon(R) Processor (kernels AVX2 (ONEDNN_MAX_CPU_ISA=AVX2), 2 '
            'CPUs), torch 2.14.1, load average 0.20 / 1.00 / 1.50 at the start and 2.00 / 1.90 / '
            '1.70 at the end; started 2026-12-04 23:16:30 UTC\nTotal 300 s') in out


@pytest.mark.parametrize('changes, missed', [({}, []), ({'mIoU': 89.9}, ['mIoU 89.900 < 90'])])
def test_the_record_holds_figures_targets_misses_and_machine(tmp_path, changes, missed):
    path = tmp_path / 'demo_results.json'
    demo_plan.write_record(str(path), results(changes), 300.0, 2, MACHINE)
    record = json.loads(path.read_text())
    assert [model['config'] for model in record['models']] == [d.config for d in demo_plan.DEMOS]
    segmenter = record['models'][2]
    assert segmenter['metrics']['mIoU'] == changes.get('mIoU', MEASURED['mIoU'])
    assert segmenter['metrics']['IoU.triangle'] == MEASURED['IoU.triangle']
    assert record['targets'] == {t.key: t.minimum for t in demo_plan.TARGETS}
    assert record['class_iou_minimum'] == demo_plan.CLASS_IOU_MINIMUM
    assert record['missed'] == missed
    assert (record['seed'], record['seconds'], record['machine']) == (2, 300.0, MACHINE)


def test_a_metric_that_was_not_logged_misses_its_target():
    metrics = dict(MEASURED)
    del metrics['mIoU']
    assert demo_plan.missed_targets(metrics) == ['mIoU not reported (key mIoU)']
    assert demo_plan.missed_targets(MEASURED) == []
    without_classes = {k: v for k, v in MEASURED.items() if not k.startswith('IoU.')}
    assert demo_plan.missed_targets(without_classes) == [
        'per-class IoU not reported (no per-class table in the test log)'
    ]


def test_class_iou_is_read_from_the_last_table_of_the_test_log():
    assert demo_plan.class_iou_from_log(SEG_TEST_LOG) == {
        k: v
        for k, v in MEASURED.items() if k.startswith('IoU.')
    }
    # A validation table logged during training comes before the test's: the last one counts.
    earlier = SEG_TEST_LOG.replace('| 94.5 ', '| 0.12 ')
    assert demo_plan.class_iou_from_log(earlier + SEG_TEST_LOG)['IoU.triangle'] == 94.5
    nan = demo_plan.class_iou_from_log(SEG_TEST_LOG.replace('| 94.5 ', '|  nan '))
    assert math.isnan(nan['IoU.triangle'])
    assert demo_plan.class_iou_from_log(SEG_TEST_LOG.split('per class')[0]) == {}


def test_a_seed_replaces_the_config_seed_of_every_model():
    classifier, detector, _ = demo_plan.DEMOS
    checkpoint, seed = 'model.backbone.init_cfg.checkpoint=w/cls.pth', 'randomness.seed=2'
    assert demo_plan.train_command(classifier, 'w', None, 2)[-2:] == ['--cfg-options', seed]
    detector_command = demo_plan.train_command(detector, 'w', 'w/cls.pth', 2)
    assert detector_command[-3:] == ['--cfg-options', checkpoint, seed]


def test_the_process_exits_with_status_1_when_a_target_is_missed():
    script = (f'import importlib.util, sys\n'
              f'spec = importlib.util.spec_from_file_location("run_demo", {run_demo.__file__!r})\n'
              f'run_demo = importlib.util.module_from_spec(spec)\n'
              f'spec.loader.exec_module(run_demo)\n'
              f'demo = run_demo.CLASSIFIER\n'
              f'run_demo.summarise([(demo, {{"accuracy/top1": 90.0}}, 1.0)], 1.0, "w")\n')
    result = subprocess.run([sys.executable, '-c', script],
                            capture_output=True,
                            text=True,
                            timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'demo targets missed: top-1 90.000 < 95; bbox mAP not reported (key coco/bbox_mAP); '
        'segm mAP not reported (key coco/segm_mAP); mIoU not reported (key mIoU); '
        'per-class IoU not reported (no per-class table in the test log)')


def test_only_named_models_are_trained_with_the_classifier_when_it_is_missing(tmp_path):
    classifier, detector, segmenter = demo_plan.DEMOS
    seg_name = osp.basename(demo_plan.work_dir_of(segmenter, ''))
    work_dir = str(tmp_path)
    assert demo_plan.selected_demos(None, work_dir) == (list(demo_plan.DEMOS), None)
    # No classifier checkpoint yet: it is trained first.
    assert demo_plan.selected_demos([seg_name], work_dir) == ([classifier, segmenter], None)
    # One from an earlier run is reused.
    classifier_dir = tmp_path / osp.basename(demo_plan.work_dir_of(classifier, ''))
    classifier_dir.mkdir()
    (classifier_dir / 'last_checkpoint').write_text('w/cls/epoch_20.pth\n')
    assert demo_plan.selected_demos([seg_name], work_dir) == ([segmenter], 'w/cls/epoch_20.pth')
    cls_name = osp.basename(demo_plan.work_dir_of(classifier, ''))
    assert demo_plan.selected_demos([seg_name, cls_name], work_dir) == ([classifier,
                                                                         segmenter], None)


def test_a_run_of_some_models_checks_only_their_targets():
    segmenter = demo_plan.DEMOS[2]
    seg_metrics = {k: v for k, v in MEASURED.items() if k in ('mIoU', 'mAcc', 'aAcc')}
    assert demo_plan.missed_targets(seg_metrics, [segmenter]) == [
        'per-class IoU not reported (no per-class table in the test log)'
    ]
    assert demo_plan.missed_targets(
        dict(seg_metrics,
             mIoU=80.0), [demo_plan.CLASSIFIER]) == ['top-1 not reported (key accuracy/top1)']
    with_classes = {k: v for k, v in MEASURED.items() if k == 'mIoU' or k.startswith('IoU.')}
    assert demo_plan.missed_targets(with_classes, [segmenter]) == []
