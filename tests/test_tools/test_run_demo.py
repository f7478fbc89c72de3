"""tools/misc/run_demo.py: each test metric is printed beside its target, and a missed target
makes the demo exit non-zero, naming it (checked on made-up metrics, without training)."""
import math
import os.path as osp
import re
import subprocess
import sys
from typing import Dict, Optional

import pytest
from analysis_tools_loader import load_tool
from conftest import REPO_ROOT

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
}


def results(changes: Optional[Dict[str, float]] = None) -> list:
    """The demo's (demo, metrics, seconds) triples, from ``MEASURED`` updated by ``changes``."""
    metrics = dict(MEASURED, **(changes or {}))
    return [(demo, {k: metrics[k] for k in demo.metrics}, 60.0) for demo in run_demo.DEMOS]


def test_targets_are_those_of_the_readme_demo_table():
    with open(osp.join(REPO_ROOT, 'README.md')) as f:
        rows = {
            line.split('|')[1].strip(): line.split('|')[6]
            for line in f if line.startswith(('| mmpretrain |', '| mmdet |', '| mmseg |'))
        }
    scopes = {
        'accuracy/top1': 'mmpretrain',
        'coco/bbox_mAP': 'mmdet',
        'coco/segm_mAP': 'mmdet',
        'mIoU': 'mmseg'
    }
    stated = {}
    for target in run_demo.TARGETS:
        stated.setdefault(scopes[target.key], []).append(target.minimum)
    assert {
        scope: [float(v) for v in re.findall(r'[\d.]+', cell)]
        for scope, cell in rows.items()
    } == stated
    reported = {key for demo in run_demo.DEMOS for key in demo.metrics}
    assert {target.key for target in run_demo.TARGETS} <= reported


def test_met_targets_are_printed_beside_their_metrics(capsys):
    # A metric exactly at its target meets it.
    run_demo.summarise(results({'coco/segm_mAP': 0.25}), 300.0, 'work_dirs/demo')
    out = capsys.readouterr().out
    assert 'accuracy/top1 100.000 (target >= 95)' in out
    assert 'coco/bbox_mAP 0.960 (target >= 0.3), coco/bbox_mAP_50 1.000,' in out
    assert 'mIoU 96.800 (target >= 70), mAcc 97.900, aAcc 99.600' in out
    assert ('top-1 100.000 (target >= 95), bbox mAP 0.960 (target >= 0.3), segm mAP 0.250 '
            '(target >= 0.25), mIoU 96.800 (target >= 70)') in out
    assert out.rstrip().endswith('All demo targets met.')


# ((metric, changed value) pairs, what the demo names as missed)
MISSES = [
    ([('coco/bbox_mAP', 0.299)], 'bbox mAP 0.299 < 0.3'),
    ([('accuracy/top1', 94.0), ('mIoU', 61.8)], 'top-1 94.000 < 95; mIoU 61.800 < 70'),
    ([('coco/segm_mAP', math.nan)], 'segm mAP nan < 0.25'),
]


@pytest.mark.parametrize('changes, missed', MISSES)
def test_a_missed_target_stops_the_demo_naming_it(capsys, changes, missed):
    with pytest.raises(SystemExit) as stop:
        run_demo.summarise(results(dict(changes)), 300.0, 'work_dirs/demo')
    assert stop.value.code == f'demo targets missed: {missed}'
    # The figures and the total are printed before it stops.
    assert 'Total 300 s' in capsys.readouterr().out


def test_a_metric_that_was_not_logged_misses_its_target():
    metrics = dict(MEASURED)
    del metrics['mIoU']
    assert run_demo.missed_targets(metrics) == ['mIoU not reported (key mIoU)']
    assert run_demo.missed_targets(MEASURED) == []


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
        'segm mAP not reported (key coco/segm_mAP); mIoU not reported (key mIoU)')
