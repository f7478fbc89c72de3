"""VECA elastic sweep: quality and latency at every core budget, with a plot.

For each budget K (default 8, 16, ..., 64) the same weights are evaluated:

- with a classifier config (a VECA backbone and a head) and its test dataloader: top-1
  accuracy and the mean cross-entropy on that dataset;
- with a segmentation, depth or detection config (mmseg / mmdet): the config's own test loop
  and evaluator (mIoU, RMSE, mAP, ...), the checkpoint loaded strictly;
- otherwise (a preset or a backbone config, any images): the feature loss against the full
  budget, ``1 - cos(global_K, global_max)`` and the same for the patch features, averaged
  over the images (``forward_tokens``), which needs no labels and no head;

and the backbone's forward latency and FLOPs at ``--img-size`` (batch 1; latency the median of
``--repeats``; FLOPs counted as ``get_flops.py`` counts them).

The budget is passed as ``active_cores=K`` to ``forward`` / ``forward_tokens``; inside a
classifier, whose forward does not take it, the backbone's ``active_cores`` attribute is set
(VECA's ``forward`` falls back to it when it is given no ``active_cores=``).

Examples:
    python tools/analysis_tools/elastic_sweep.py veca-small --images data/shapes/cls/val \\
        --img-size 224 --out work_dirs/elastic
    python tools/analysis_tools/elastic_sweep.py configs/demo/upernet_veca-demo_shapes-ade.py \\
        --checkpoint CHECKPOINT --img-size 128 --out work_dirs/elastic_seg
"""
import argparse
import json
import os
import os.path as osp
import textwrap
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F
from mmengine.config import DictAction
from torch import Tensor, nn

from mmlinear.apis import (BACKBONE_PRESETS, build_backbone, build_classifier, count_flops,
                           input_normalization, list_images, load_images)
from mmlinear.cli import build_test_runner, run_test_loop
from mmlinear.cli.benchmark import median_ms
from mmlinear.models.layers import check_core_budgets
from mmlinear.utils.progress import ProgressETA

# VECA's nested training drops whole chunks of 8 cores, so only multiples of 8 are budgets
# the weights were trained for.
BUDGET_STEP = 8


@torch.no_grad()
def feature_loss(backbone: nn.Module, x: Tensor, budget: int, full: int) -> Dict[str, float]:
    """1 - cosine similarity of the global and patch features at ``budget`` vs ``full``."""
    reference = backbone.forward_tokens(x, active_cores=full)
    tokens = backbone.forward_tokens(x, active_cores=budget)
    return dict(
        global_loss=float(
            1 - F.cosine_similarity(tokens['global'], reference['global'], dim=-1).mean()),
        patch_loss=float(
            1 - F.cosine_similarity(tokens['patches'], reference['patches'], dim=-1).mean()))


@torch.no_grad()
def classifier_metrics(model: nn.Module, dataloader, budget: int) -> Dict[str, float]:
    """Top-1 accuracy (%) and mean cross-entropy of an mmpretrain classifier with ``budget``
    active cores (the loss still moves where the accuracy saturates)."""
    model.backbone.active_cores = budget
    correct = total = 0
    nll = 0.
    for data in dataloader:
        data = model.data_preprocessor(data, False)
        logits = model(data['inputs'], mode='tensor')
        labels = torch.cat([s.gt_label for s in data['data_samples']])
        correct += int((logits.argmax(-1) == labels).sum())
        nll += float(F.cross_entropy(logits.float(), labels, reduction='sum'))
        total += len(labels)
    return dict(top1=100 * correct / max(total, 1), cross_entropy=nll / max(total, 1))


#: The metric a dense sweep plots, the first of these that its evaluator reports.
DENSE_METRICS = ('mIoU', 'rmse', 'coco/segm_mAP', 'coco/bbox_mAP')


def dense_metric(row: Dict[str, float], requested: Optional[str]) -> str:
    """The metric of a dense sweep to plot: ``requested`` or the first of ``DENSE_METRICS``
    in the test loop's ``row``; SystemExit naming the metrics there are otherwise."""
    metric = requested or next((m for m in DENSE_METRICS if m in row), None)
    if metric not in row:
        reported = sorted(set(row) - {'active_cores', 'latency_ms', 'gflops'})
        raise SystemExit(f'--metric {metric!r} is not among the test loop\'s metrics {reported}')
    return metric


def backbone_gflops(backbone: nn.Module, budget: int, img_size: int) -> float:
    """GFLOPs of one ``img_size`` forward pass with ``budget`` active cores."""
    default, backbone.active_cores = backbone.active_cores, budget
    backbone.eval()
    try:
        return count_flops(backbone, img_size) / 1e9
    finally:
        backbone.active_cores = default


def plot(rows: List[dict], metric: str, path: str, title: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.3))
    budgets = [r['active_cores'] for r in rows]
    ax.plot(budgets, [r[metric] for r in rows], marker='o', color='C0')
    ax.set_xlabel('active cores K')
    ax.set_ylabel(metric, color='C0')
    twin = ax.twinx()
    twin.plot(budgets, [r['latency_ms'] for r in rows], marker='s', color='C1')
    twin.set_ylabel('latency (ms)', color='C1')
    # Wrapped: a config's name alone can be wider than the figure.
    ax.set_title(textwrap.fill(title, 60), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('model', help='VECA preset (veca-small, ...) or config file')
    parser.add_argument('--checkpoint', default=None)
    parser.add_argument(
        '--images',
        nargs='+',
        default=None,
        help='images for the feature loss (when not using a classifier '
        "config's test set)")
    parser.add_argument('--max-images', type=int, default=32)
    parser.add_argument(
        '--budgets', nargs='+', type=int, default=list(range(BUDGET_STEP, 65, BUDGET_STEP)))
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--threads', type=int, default=None)
    parser.add_argument(
        '--metric',
        default=None,
        help='the dense evaluator\'s metric to plot (default: the first of '
        f'{", ".join(DENSE_METRICS)} it reports)')
    parser.add_argument('--out', default='work_dirs/elastic_sweep')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        default={},
        help='override settings of a classifier config, e.g. '
        'test_dataloader.dataset.data_root=PATH')
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmlinear_elastic_sweep', log_level='WARNING')
    if args.threads:
        torch.set_num_threads(args.threads)

    classifier, dataloader, runner = None, None, None
    if args.model not in BACKBONE_PRESETS and args.images is None:
        from mmengine.config import Config
        from mmengine.runner import Runner
        cfg = Config.fromfile(args.model)
        cfg.merge_from_dict(args.cfg_options)
        if 'head' in cfg.model:  # a classifier config: accuracy on its test set
            classifier = build_classifier(cfg, args.checkpoint)
            dataloader = Runner.build_dataloader(cfg.test_dataloader)
            backbone = classifier.backbone
        else:  # a dense config: its own test loop and evaluator
            # An elastically trained config's ElasticCoreBudgetHook would reset every
            # budget to its evaluation budget before each test epoch: the sweep sets them.
            cfg.custom_hooks = [
                h for h in cfg.get('custom_hooks', [])
                if h['type'].split('.')[-1] != 'ElasticCoreBudgetHook'
            ]
            try:
                runner = build_test_runner(cfg, args.checkpoint, osp.join(args.out, 'runner'))
            except ValueError as error:  # another model's checkpoint
                raise SystemExit(str(error))
            backbone = runner.model.backbone
    else:
        if args.images is None:
            raise SystemExit('give --images for the feature loss of a preset')
        if args.cfg_options:
            raise SystemExit('--cfg-options applies to a classifier config (its test set) only')
        backbone = build_backbone(args.model, checkpoint=args.checkpoint)
        backbone.eval()
        x_eval, _ = load_images(
            list_images(args.images, args.max_images), args.img_size,
            *input_normalization(args.model))
    if not hasattr(backbone, 'forward_tokens'):
        raise SystemExit(f'{type(backbone).__name__} is not an elastic (VECA) backbone')
    max_cores = getattr(backbone, 'max_cores', 64)
    try:
        budgets = check_core_budgets(args.budgets, max_cores, BUDGET_STEP)
    except ValueError as error:
        raise SystemExit(str(error))

    if args.metric and runner is None:
        raise SystemExit('--metric applies to dense (mmseg / mmdet) configs only')
    metric = 'top1' if classifier is not None else 'global_loss'
    x_time = torch.randn(1, 3, args.img_size, args.img_size)
    rows = []
    progress = ProgressETA(len(budgets))
    for budget in budgets:
        with torch.no_grad():
            latency_ms = median_ms(lambda: backbone(x_time, active_cores=budget), args.warmup,
                                   args.repeats)
        row = dict(
            active_cores=budget,
            latency_ms=latency_ms,
            gflops=backbone_gflops(backbone, budget, args.img_size))
        if classifier is not None:
            row.update(classifier_metrics(classifier, dataloader, budget))
        elif runner is not None:
            backbone.active_cores = budget  # the runner's model runs it at this budget
            row.update(run_test_loop(runner))
        else:
            row.update(feature_loss(backbone, x_eval, budget, budgets[-1]))
        if not rows and runner is not None:
            metric = dense_metric(row, args.metric)  # before the other budgets run
        rows.append(row)
        progress.step(', '.join(f'{k} {v:.4g}' for k, v in row.items()))
    os.makedirs(args.out, exist_ok=True)
    with open(osp.join(args.out, 'elastic_sweep.json'), 'w') as f:
        json.dump(dict(settings=vars(args), results=rows), f, indent=1)
    name = osp.splitext(osp.basename(args.model))[0]
    plot(rows, metric, osp.join(args.out, 'elastic_sweep.png'),
         f'{name}: {metric} and latency ({args.img_size}px, batch 1) per core budget')
    print(f'wrote {args.out}/elastic_sweep.json and elastic_sweep.png')


if __name__ == '__main__':
    main()
