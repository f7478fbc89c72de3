"""The demo: the papers' workflow with a Linear-InfViT in each toolbox on the bundled shapes data.

First a classifier (mmpretrain) is trained, then a Mask R-CNN (mmdet, COCO bbox/segm mAP from
pycocotools) and an UperNet (mmseg, mIoU) start from its backbone and are fine-tuned: their
configs load it with ``init_cfg=dict(type='Pretrained', prefix='backbone.')``, and the demo
hands them the checkpoint it has just written (``--cfg-options
model.backbone.init_cfg.checkpoint=...``). Each model runs through ``tools/train.py`` then
``tools/test.py``; the demo shows mmengine's progress lines (with their ETA) and an overall
ETA, and ends with the test metrics, each beside its target (the figures the README's demo
table states), and the total time; it exits non-zero, naming them, when targets are missed.
Full logs go to ``work_dirs/demo/<task>/``. Run from the repository root after
``python tools/misc/make_tiny_datasets.py`` (``make demo`` does both).
"""
import argparse
import glob
import json
import os
import os.path as osp
import subprocess
import sys
import time
from typing import Dict, List, NamedTuple, Optional, Tuple

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


class Demo(NamedTuple):
    name: str
    config: str
    metrics: List[str]
    expected_seconds: float  # rough share of the run (2 loaded CPU cores), for the overall ETA
    fine_tunes_classifier: bool  # starts from the backbone of the demo's classifier


CLASSIFIER = Demo('classification (mmpretrain)', 'configs/demo/infvit-demo-linear_shapes-cls.py',
                  ['accuracy/top1'], 120, False)
DEMOS = [
    CLASSIFIER,
    Demo('instance segmentation (mmdet)',
         'configs/demo/mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py',
         ['coco/bbox_mAP', 'coco/bbox_mAP_50', 'coco/segm_mAP', 'coco/segm_mAP_50'], 290, True),
    Demo('semantic segmentation (mmseg)', 'configs/demo/upernet_infvit-demo-linear_shapes-ade.py',
         ['mIoU', 'mAcc', 'aAcc'], 150, True),
]


class Target(NamedTuple):
    name: str  # as the README's demo table names the metric
    key: str  # the metric's key in the test log
    minimum: float  # in the metric's own unit: percent for top-1 and mIoU, a fraction for mAP


# The headline figures, printed last, and the targets of the README's demo table.
TARGETS = [
    Target('top-1', 'accuracy/top1', 95.0),
    Target('bbox mAP', 'coco/bbox_mAP', 0.30),
    Target('segm mAP', 'coco/segm_mAP', 0.25),
    Target('mIoU', 'mIoU', 70.0),
]
PROGRESS_MARKERS = ('Epoch(', 'Iter(')


def progress_summary(line: str) -> str:
    """The position, ETA and loss of an mmengine progress line (empty for other lines)."""
    starts = [line.find(m) for m in PROGRESS_MARKERS if m in line]
    if not starts:
        return ''
    fields = line[min(starts):].split()
    keep = [fields[0] + ' ' + fields[1]] if len(fields) > 1 else fields[:1]
    for key in ('eta:', 'loss:', 'accuracy/top1:', 'coco/bbox_mAP:', 'coco/segm_mAP:', 'mIoU:'):
        if key in fields[:-1]:
            keep.append(f'{key} {fields[fields.index(key) + 1]}')
    return '  '.join(keep)


def run_logged(cmd: List[str], log_path: str, show_progress: bool) -> None:
    """Run a command, writing its whole output to ``log_path`` and echoing progress lines."""
    with open(log_path, 'w') as log:
        proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            log.write(line)
            if show_progress:
                progress = progress_summary(line)
                if progress:
                    print('    ' + progress, flush=True)
        if proc.wait() != 0:
            raise SystemExit(f'command failed ({proc.returncode}): {" ".join(cmd)}\n'
                             f'see {log_path}')


def latest_test_metrics(work_dir: str) -> Dict[str, float]:
    """The metrics mmengine's LoggerHook dumped after the test epoch."""
    logs = sorted(glob.glob(osp.join(work_dir, '*', '*.json')), key=osp.getmtime)
    if not logs:
        raise SystemExit(f'no metrics log found under {work_dir}')
    with open(logs[-1]) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return lines[-1]


def work_dir_of(demo: Demo, root: str) -> str:
    """Where the demo writes a model's logs and checkpoints: ``<root>/<config name>``."""
    return osp.join(root, osp.splitext(osp.basename(demo.config))[0])


def train_command(demo: Demo, work_dir: str, classifier_checkpoint: Optional[str]) -> List[str]:
    """``tools/train.py`` for one model; a fine-tuning model starts from the classifier's
    checkpoint (its config's ``init_cfg`` names the demo's default path; this passes the
    one the demo has just written)."""
    cmd = [sys.executable, 'tools/train.py', demo.config, '--work-dir', work_dir]
    if demo.fine_tunes_classifier:
        if classifier_checkpoint is None:
            raise ValueError(f'{demo.config} fine-tunes the classifier: train it first')
        cmd += ['--cfg-options', f'model.backbone.init_cfg.checkpoint={classifier_checkpoint}']
    return cmd


def with_target(key: str, value: float) -> str:
    """``value`` to three decimals, followed by the target of ``key`` where it has one."""
    minimum = {t.key: t.minimum for t in TARGETS}.get(key)
    return f'{value:.3f}' + ('' if minimum is None else f' (target >= {minimum:g})')


def missed_targets(metrics: Dict[str, float]) -> List[str]:
    """The targets that ``metrics`` miss, each as '<name> <value> < <minimum>'.

    A metric that is absent counts as missed: a run that logged no figure has not shown it.
    """
    missed = []
    for target in TARGETS:
        value = metrics.get(target.key)
        if value is None:
            missed.append(f'{target.name} not reported (key {target.key})')
        elif not value >= target.minimum:  # NaN misses too
            missed.append(f'{target.name} {value:.3f} < {target.minimum:g}')
    return missed


def summarise(results: List[Tuple[Demo, Dict[str, float], float]], seconds: float,
              work_dir: str) -> None:
    """Print each model's test metrics beside their targets, then check the targets.

    Args:
        results (list[tuple[Demo, dict, float]]): Per model: the demo, its test metrics and
            the seconds it took.
        seconds (float): The whole run's time.
        work_dir (str): Where the logs and checkpoints are.

    Raises:
        SystemExit: Exit status 1, naming every missed target.
    """
    print('\nDemo results (test split of the bundled shapes data):')
    for demo, metrics, demo_seconds in results:
        shown = ', '.join(f'{k} {with_target(k, metrics[k])}' for k in demo.metrics)
        print(f'  {demo.name:32s} {shown}  [{demo_seconds:.0f} s]')
    everything = {k: v for _, metrics, _ in results for k, v in metrics.items()}
    print('  ' + ', '.join(f'{t.name} {with_target(t.key, everything[t.key])}'
                           for t in TARGETS if t.key in everything))
    print(f'Total {seconds:.0f} s; logs and checkpoints in {work_dir}/')
    missed = missed_targets(everything)
    if missed:
        raise SystemExit('demo targets missed: ' + '; '.join(missed))
    print('All demo targets met.')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--work-dir', default='work_dirs/demo')
    parser.add_argument('--quiet', action='store_true', help='hide the training progress lines')
    args = parser.parse_args()
    if not osp.exists(osp.join(REPO_ROOT, 'data/shapes/.complete.json')):
        raise SystemExit('the bundled data is missing: run '
                         'python tools/misc/make_tiny_datasets.py first')
    start = time.time()
    remaining = sum(d.expected_seconds for d in DEMOS)
    results = []
    classifier_checkpoint = None
    for i, demo in enumerate(DEMOS, 1):
        elapsed = time.time() - start
        starts_from = ' (from the classifier\'s backbone)' if demo.fine_tunes_classifier else ''
        print(
            f'[{i}/{len(DEMOS)}] {demo.name}{starts_from}: {demo.config}  '
            f'(elapsed {elapsed:.0f} s, ETA about {remaining:.0f} s)',
            flush=True)
        work_dir = work_dir_of(demo, args.work_dir)
        os.makedirs(osp.join(REPO_ROOT, work_dir), exist_ok=True)
        task_start = time.time()
        run_logged(
            train_command(demo, work_dir, classifier_checkpoint),
            osp.join(REPO_ROOT, work_dir, 'train.log'), not args.quiet)
        with open(osp.join(REPO_ROOT, work_dir, 'last_checkpoint')) as f:
            checkpoint = f.read().strip()
        if demo is CLASSIFIER:
            classifier_checkpoint = checkpoint
        test_dir = osp.join(work_dir, 'test')
        run_logged(
            [sys.executable, 'tools/test.py', demo.config, checkpoint, '--work-dir', test_dir],
            osp.join(REPO_ROOT, work_dir, 'test.log'), False)
        metrics = latest_test_metrics(osp.join(REPO_ROOT, test_dir))
        seconds = time.time() - task_start
        remaining = max(remaining - demo.expected_seconds, 0)
        results.append((demo, metrics, seconds))
        print(
            '    ' + ', '.join(f'{k} = {with_target(k, metrics[k])}'
                               for k in demo.metrics) + f'  ({seconds:.0f} s)',
            flush=True)
    summarise(results, time.time() - start, args.work_dir)


if __name__ == '__main__':
    main()
