"""The demo: the papers' workflow with a Linear-InfViT in each toolbox on the bundled shapes data.

First a classifier (mmpretrain) is trained, then a Mask R-CNN (mmdet, COCO bbox/segm mAP from
pycocotools) and an UperNet (mmseg, mIoU) start from its backbone and are fine-tuned: their
configs load it with ``init_cfg=dict(type='Pretrained', prefix='backbone.')``, and the demo
hands them the checkpoint it has just written (``--cfg-options
model.backbone.init_cfg.checkpoint=...``). Each model runs through ``tools/train.py`` then
``tools/test.py``; the demo shows mmengine's progress lines (with their ETA) and an overall
ETA, and ends with the test metrics, each beside its target (the figures the README's demo
table states), the segmenter's per-class IoU from mmseg's test log (every class has a target:
a model that never predicts one class can still reach a fair mIoU), and the total time; it
exits non-zero, naming them, when targets are missed. The figures are also written, with the
machine they were measured on (CPU model, the instruction set its kernels ran, load before and
after) and the seed, to ``<work dir>/demo_results.json``, a missed target included.
Full logs go to ``work_dirs/demo/<task>/``. Run from the repository root after
``python tools/misc/make_tiny_datasets.py`` (``make demo`` does both). ``--only NAME ...``
trains only the models named by their configs' names (the classifier too when a fine-tuning
model is named and the classifier has no checkpoint in its work directory yet), and checks
only their targets: ``make demo-large`` trains the UperNet it segments with this way.
"""
import argparse
import glob
import json
import os
import os.path as osp
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

from mmlinear.cli.demo import (CLASS_IOU_PREFIX, CLASSIFIER, DEMOS, TARGETS, Demo,
                               class_iou_from_log, measured_on, merged_metrics, missed_targets,
                               selected_demos, train_command, with_target, work_dir_of,
                               write_record)

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

#: What starts an mmengine progress line.
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


def summarise(results: List[Tuple[Demo, Dict[str, float], float]],
              seconds: float,
              work_dir: str,
              demos: Sequence[Demo] = DEMOS,
              machine: Optional[dict] = None) -> None:
    """Print each model's test metrics beside their targets, then check the targets.

    Args:
        results (list[tuple[Demo, dict, float]]): Per model: the demo, its test metrics and
            the seconds it took.
        seconds (float): The whole run's time.
        work_dir (str): Where the logs and checkpoints are.
        demos (Sequence[Demo]): The models the run was asked for, whose targets are checked.
            Defaults to all of ``DEMOS``.
        machine (dict, optional): The machine (:func:`measured_on`), printed before the total.

    Raises:
        SystemExit: Exit status 1, naming every missed target.
    """
    print('\nDemo results (test split of the bundled shapes data):')
    for demo, metrics, demo_seconds in results:
        shown = ', '.join(f'{k} {with_target(k, metrics[k])}' for k in demo.metrics)
        print(f'  {demo.name:32s} {shown}  [{demo_seconds:.0f} s]')
        for key, value in metrics.items():
            if key.startswith(CLASS_IOU_PREFIX):
                print(f'    {key:32s} {with_target(key, value)}')
    everything = merged_metrics(results)
    print('  ' + ', '.join(f'{t.name} {with_target(t.key, everything[t.key])}'
                           for t in TARGETS if t.key in everything))
    if machine is not None:
        print(measured_on(machine))
    print(f'Total {seconds:.0f} s; logs and checkpoints in {work_dir}/')
    missed = missed_targets(everything, demos)
    if missed:
        raise SystemExit('demo targets missed: ' + '; '.join(missed))
    print('All demo targets met.')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--work-dir', default='work_dirs/demo')
    parser.add_argument('--quiet', action='store_true', help='hide the training progress lines')
    parser.add_argument(
        '--seed', type=int, help="every model's training seed (default: the configs' seed, 0)")
    parser.add_argument(
        '--only',
        nargs='+',
        choices=[osp.basename(work_dir_of(demo, '')) for demo in DEMOS],
        help='train only these models (config names), and the classifier they start from '
        'when it has no checkpoint yet')
    args = parser.parse_args()
    if not osp.exists(osp.join(REPO_ROOT, 'data/shapes/.complete.json')):
        raise SystemExit('the bundled data is missing: run '
                         'python tools/misc/make_tiny_datasets.py first')
    demos, classifier_checkpoint = selected_demos(args.only, osp.join(REPO_ROOT, args.work_dir))
    from mmlinear.cli.benchmark.report import machine_info
    machine = machine_info('cpu')
    start = time.time()
    remaining = sum(d.expected_seconds for d in demos)
    results = []
    for i, demo in enumerate(demos, 1):
        elapsed = time.time() - start
        starts_from = ' (from the classifier\'s backbone)' if demo.fine_tunes_classifier else ''
        print(
            f'[{i}/{len(demos)}] {demo.name}{starts_from}: {demo.config}  '
            f'(elapsed {elapsed:.0f} s, ETA about {remaining:.0f} s)',
            flush=True)
        work_dir = work_dir_of(demo, args.work_dir)
        os.makedirs(osp.join(REPO_ROOT, work_dir), exist_ok=True)
        task_start = time.time()
        run_logged(
            train_command(demo, work_dir, classifier_checkpoint, args.seed),
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
        if demo.reports_class_iou:
            with open(osp.join(REPO_ROOT, work_dir, 'test.log')) as f:
                metrics.update(class_iou_from_log(f.read()))
        seconds = time.time() - task_start
        remaining = max(remaining - demo.expected_seconds, 0)
        results.append((demo, metrics, seconds))
        print(
            '    ' + ', '.join(f'{k} = {with_target(k, metrics[k])}'
                               for k in demo.metrics) + f'  ({seconds:.0f} s)',
            flush=True)
    seconds = time.time() - start
    machine['load_average_end'] = list(os.getloadavg())
    write_record(
        osp.join(REPO_ROOT, args.work_dir, 'demo_results.json'), results, seconds, args.seed,
        machine, demos)
    summarise(results, seconds, args.work_dir, demos, machine)


if __name__ == '__main__':
    main()
