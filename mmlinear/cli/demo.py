"""The demo's plan and its bar: the models ``tools/misc/run_demo.py`` trains and tests on the
bundled shapes data (a classifier, then a Mask R-CNN and an UperNet fine-tuned from its
backbone), their commands, the targets of the README's demo table and the check and record of
a run's metrics against them."""
import json
import os.path as osp
import sys
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple


class Demo(NamedTuple):
    name: str
    config: str
    metrics: List[str]
    expected_seconds: float  # rough share of the run (2 loaded CPU cores), for the overall ETA
    fine_tunes_classifier: bool  # starts from the backbone of the demo's classifier
    reports_class_iou: bool = False  # its test log holds mmseg's per-class IoU table


CLASSIFIER = Demo('classification (mmpretrain)', 'configs/demo/infvit-demo-linear_shapes-cls.py',
                  ['accuracy/top1'], 120, False)
DEMOS = [
    CLASSIFIER,
    Demo('instance segmentation (mmdet)',
         'configs/demo/mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py',
         ['coco/bbox_mAP', 'coco/bbox_mAP_50', 'coco/segm_mAP', 'coco/segm_mAP_50'], 290, True),
    Demo('semantic segmentation (mmseg)', 'configs/demo/upernet_infvit-demo-linear_shapes-ade.py',
         ['mIoU', 'mAcc', 'aAcc'], 150, True, True),
]


class Target(NamedTuple):
    name: str  # as the README's demo table names the metric
    key: str  # the metric's key in the test log
    minimum: float  # in the metric's own unit: percent for top-1 and mIoU, a fraction for mAP


# The headline figures, printed last, and the targets of the README's demo table: below what
# was measured on two CPUs (bbox / segm mAP 0.96 / 0.91, mIoU 94.7 or more), with margin for
# the CPU's floating-point path, which changes a training's trajectory.
TARGETS = [
    Target('top-1', 'accuracy/top1', 95.0),
    Target('bbox mAP', 'coco/bbox_mAP', 0.90),
    Target('segm mAP', 'coco/segm_mAP', 0.85),
    Target('mIoU', 'mIoU', 90.0),
]
# Every class's IoU in the segmenter's test, in percent: mIoU alone would pass a model that
# never predicts one of the four classes (mIoU 75 with the other three perfect).
CLASS_IOU_MINIMUM = 80.0
# A class's IoU among a model's metrics: 'IoU.<class name>'.
CLASS_IOU_PREFIX = 'IoU.'


def class_iou_from_log(log_text: str) -> Dict[str, float]:
    """Each class's IoU from the last per-class table of an mmseg test log.

    mmseg's ``IoUMetric`` logs ``per class results:``, then a table with a ``Class`` and an
    ``IoU`` column (percent; ``nan`` for a class in neither the labels nor the predictions).

    Args:
        log_text (str): The output of ``tools/test.py``.

    Returns:
        dict[str, float]: ``{'IoU.<class>': IoU}`` in the table's order; empty when the log
        holds no table.
    """
    lines = log_text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.rstrip().endswith('per class results:')]
    if not starts:
        return {}
    rows = []
    for line in lines[starts[-1] + 1:]:
        if line.startswith('|'):
            rows.append([cell.strip() for cell in line.strip().strip('|').split('|')])
        elif rows and not line.startswith('+'):  # the line after the table
            break
    if not rows:
        return {}
    header = rows[0]
    name, iou = header.index('Class'), header.index('IoU')
    return {CLASS_IOU_PREFIX + row[name]: float(row[iou]) for row in rows[1:]}


def work_dir_of(demo: Demo, root: str) -> str:
    """Where the demo writes a model's logs and checkpoints: ``<root>/<config name>``."""
    return osp.join(root, osp.splitext(osp.basename(demo.config))[0])


def train_command(demo: Demo,
                  work_dir: str,
                  classifier_checkpoint: Optional[str],
                  seed: Optional[int] = None) -> List[str]:
    """``tools/train.py`` for one model; a fine-tuning model starts from the classifier's
    checkpoint (its config's ``init_cfg`` names the demo's default path; this passes the
    one the demo has just written), and ``seed``, where given, replaces the config's."""
    options = []
    if demo.fine_tunes_classifier:
        if classifier_checkpoint is None:
            raise ValueError(f'{demo.config} fine-tunes the classifier: train it first')
        options.append(f'model.backbone.init_cfg.checkpoint={classifier_checkpoint}')
    if seed is not None:
        options.append(f'randomness.seed={seed}')
    cmd = [sys.executable, 'tools/train.py', demo.config, '--work-dir', work_dir]
    return cmd + (['--cfg-options'] + options if options else [])


def with_target(key: str, value: float) -> str:
    """``value`` to three decimals, followed by the target of ``key`` where it has one."""
    minimum = {t.key: t.minimum for t in TARGETS}.get(key)
    if key.startswith(CLASS_IOU_PREFIX):
        minimum = CLASS_IOU_MINIMUM
    return f'{value:.3f}' + ('' if minimum is None else f' (target >= {minimum:g})')


def missed_targets(metrics: Dict[str, float], demos: Sequence[Demo] = DEMOS) -> List[str]:
    """The targets of ``demos`` that ``metrics`` miss, each as '<name> <value> < <minimum>'.

    A metric that is absent counts as missed: a run that logged no figure has not shown it. So
    do metrics without any per-class IoU (``IoU.<class>`` keys) when one of ``demos`` reports
    them, each of which has to reach ``CLASS_IOU_MINIMUM``.

    Args:
        metrics (dict[str, float]): The test metrics of every model the run trained.
        demos (Sequence[Demo]): The models the run was asked for: only their metrics' targets
            are checked. Defaults to all of ``DEMOS``.
    """
    reported = {key for demo in demos for key in demo.metrics}
    missed = []
    for target in (t for t in TARGETS if t.key in reported):
        value = metrics.get(target.key)
        if value is None:
            missed.append(f'{target.name} not reported (key {target.key})')
        elif not value >= target.minimum:  # NaN misses too
            missed.append(f'{target.name} {value:.3f} < {target.minimum:g}')
    class_iou = {k: v for k, v in metrics.items() if k.startswith(CLASS_IOU_PREFIX)}
    if not class_iou and any(demo.reports_class_iou for demo in demos):
        missed.append('per-class IoU not reported (no per-class table in the test log)')
    missed += [
        f'{key} {value:.3f} < {CLASS_IOU_MINIMUM:g}' for key, value in class_iou.items()
        if not value >= CLASS_IOU_MINIMUM
    ]
    return missed


def merged_metrics(results: List[Tuple[Demo, Dict[str, float], float]]) -> Dict[str, float]:
    """Every model's test metrics in one dict (their keys differ by toolbox)."""
    return {k: v for _, metrics, _ in results for k, v in metrics.items()}


def measured_on(machine: dict) -> str:
    """The machine a run's figures were measured on, as a line of the summary.

    Args:
        machine (dict): ``machine_info('cpu')`` taken at the start, with ``load_average_end``.
    """
    loads = [
        ' / '.join(f'{x:.2f}' for x in machine[key]) for key in ('load_average', 'load_average_end')
    ]
    return (f'Measured on {machine["cpu"]} (kernels {machine["kernel_isa"]}, '
            f'{machine["cpu_count"]} CPUs), torch {machine["torch"]}, load average {loads[0]} at '
            f'the start and {loads[1]} at the end; started {machine["date"]}')


def write_record(path: str,
                 results: List[Tuple[Demo, Dict[str, float], float]],
                 seconds: float,
                 seed: Optional[int],
                 machine: dict,
                 demos: Sequence[Demo] = DEMOS) -> None:
    """Write a run's figures, targets and machine as JSON (before the targets are enforced,
    so a run that misses one is recorded too).

    Args:
        path (str): The JSON file.
        results (list[tuple[Demo, dict, float]]): Per model: the demo, its test metrics and
            the seconds it took.
        seconds (float): The whole run's time.
        seed (int, optional): The training seed (None: the configs' seed).
        machine (dict): ``machine_info('cpu')`` with ``load_average_end``.
        demos (Sequence[Demo]): The models the run was asked for.
    """
    record = dict(
        models=[
            dict(name=demo.name, config=demo.config, metrics=metrics, seconds=demo_seconds)
            for demo, metrics, demo_seconds in results
        ],
        targets={t.key: t.minimum
                 for t in TARGETS},
        class_iou_minimum=CLASS_IOU_MINIMUM,
        missed=missed_targets(merged_metrics(results), demos),
        seconds=seconds,
        seed=seed,
        machine=machine)
    with open(path, 'w') as f:
        json.dump(record, f, indent=1)


def selected_demos(only: Optional[Sequence[str]],
                   work_dir: str) -> Tuple[List[Demo], Optional[str]]:
    """The models to train for ``--only`` and the classifier checkpoint they start from.

    Args:
        only (Sequence[str], optional): Config names (``work_dir_of``'s folder names) of the
            models to train; None trains every model of ``DEMOS``.
        work_dir (str): The demo's work directory (absolute, or relative to the current
            directory).

    Returns:
        tuple[list[Demo], str | None]: The models in ``DEMOS``' order, and the checkpoint
        that a classifier trained before wrote (its ``last_checkpoint``) when a fine-tuning
        model is named without the classifier; without one, the classifier is trained first.
    """
    if only is None:
        return list(DEMOS), None
    demos = [demo for demo in DEMOS if osp.basename(work_dir_of(demo, work_dir)) in only]
    if CLASSIFIER in demos or not any(demo.fine_tunes_classifier for demo in demos):
        return demos, None
    last = osp.join(work_dir_of(CLASSIFIER, work_dir), 'last_checkpoint')
    if osp.isfile(last):
        with open(last) as f:
            return demos, f.read().strip()
    return [CLASSIFIER] + demos, None
