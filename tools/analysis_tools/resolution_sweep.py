"""One checkpoint at several input resolutions: the config's own metric and the backbone's
latency against the side, for one or more models (VECA beside a dense ViT of its width).

For every model (a classification, segmentation or depth config and its checkpoint, loaded
strictly) and every ``--resolutions`` side S, the test pipeline's resizing and cropping is
replaced by one resize of each image to S x S, the config's test loop and evaluator run
(mmpretrain's accuracy, mmseg's mIoU against the labels at their own size, RMSE, ...), and the
backbone's forward latency at S x S, batch 1, is timed (median of ``--repeats``). Writes
``resolution_sweep.json`` and ``resolution_sweep.png`` into ``--out``.

Example:
    python tools/analysis_tools/resolution_sweep.py \\
        --models configs/demo/veca-demo_shapes-cls.py \\
            configs/demo/infvit-demo-linear_shapes-cls.py \\
        --checkpoints VECA_CHECKPOINT INFVIT_CHECKPOINT \\
        --resolutions 32 64 96 128 --out work_dirs/resolution_sweep
"""
import argparse
import copy
import json
import os
import os.path as osp
from typing import Dict, List, Optional, Sequence

import torch
from mmengine.config import Config

from mmlinear.cli import (build_test_runner, fix_dataloaders, pair_checkpoints, resized_pipeline,
                          run_test_loop)
from mmlinear.cli.benchmark import median_ms
from mmlinear.utils.progress import ProgressETA

#: The metric plotted, the first of these that the evaluator reports (or --metric).
METRICS = ('accuracy/top1', 'mIoU', 'rmse', 'coco/bbox_mAP')


def sweep_model(config: str, checkpoint: Optional[str], resolutions: Sequence[int],
                args: argparse.Namespace, progress: ProgressETA) -> List[Dict[str, float]]:
    """The metrics and latency of one model at every resolution."""
    from mmengine.runner import Runner
    cfg = Config.fromfile(config)
    fix_dataloaders(cfg)
    name = osp.splitext(osp.basename(config))[0]
    runner = build_test_runner(cfg, checkpoint, osp.join(args.out, 'runners', name))
    backbone = runner.model.backbone
    patch = getattr(backbone, 'patch_size', 16)
    if min(resolutions) < patch:
        raise ValueError(f'--resolutions must be at least one patch ({patch} px for {name}), '
                         f'got {min(resolutions)}')
    rows = []
    for side in resolutions:
        # Timed first, before this side's loader workers start to compete for the CPU.
        x = torch.randn(1, 3, side, side)
        backbone.eval()
        with torch.no_grad():
            latency_ms = median_ms(lambda: backbone(x), args.warmup, args.repeats)
        loader = copy.deepcopy(cfg.test_dataloader)
        loader.dataset.pipeline = resized_pipeline(loader.dataset.pipeline, side)
        runner.test_loop.dataloader = Runner.build_dataloader(loader, seed=0)
        row = dict(resolution=side, **run_test_loop(runner), latency_ms=latency_ms)
        rows.append(row)
        progress.step(f'{name} {side}px: ' +
                      ', '.join(f'{k} {v:.4g}' for k, v in row.items() if k != 'resolution'))
    return rows


def plotted_metric(rows: List[Dict[str, float]], requested: Optional[str]) -> str:
    """``requested`` or the first of ``METRICS`` that every model reports."""
    common = set.intersection(*(set(r) for r in rows)) - {'resolution', 'latency_ms'}
    metric = requested or next((m for m in METRICS if m in common), None)
    if metric not in common:
        raise SystemExit(f'--metric {metric!r} is not reported by every model; they share '
                         f'{sorted(common)}')
    return metric


def plot(results: Dict[str, List[dict]], metric: str, path: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2))
    for i, (name, rows) in enumerate(results.items()):
        sides = [r['resolution'] for r in rows]
        left.plot(sides, [r[metric] for r in rows], marker='o', color=f'C{i}', label=name)
        right.plot(sides, [r['latency_ms'] for r in rows], marker='s', color=f'C{i}', label=name)
    left.set_xlabel('input side (px)')
    left.set_ylabel(metric)
    right.set_xlabel('input side (px)')
    right.set_ylabel('backbone latency (ms, batch 1)')
    right.set_yscale('log')
    left.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--models', nargs='+', required=True, help='config files')
    parser.add_argument(
        '--checkpoints',
        nargs='+',
        default=None,
        help="one per model (a whole model's checkpoint); 'none' keeps the config's "
        'initialisation')
    parser.add_argument('--resolutions', nargs='+', type=int, default=[256, 384, 512, 768, 1024])
    parser.add_argument('--metric', default=None, help=f'default: the first of {METRICS}')
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--out', default='work_dirs/resolution_sweep')
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmlinear_resolution_sweep', log_level='WARNING')
    resolutions = sorted(set(args.resolutions))
    progress = ProgressETA(len(args.models) * len(resolutions))
    results = {}
    try:
        checkpoints = pair_checkpoints(args.models, args.checkpoints)
    except ValueError as error:
        raise SystemExit(str(error))
    for config, checkpoint in zip(args.models, checkpoints):
        try:
            results[osp.splitext(osp.basename(config))[0]] = sweep_model(
                config, None if checkpoint == 'none' else checkpoint, resolutions, args, progress)
        except ValueError as error:  # another model's checkpoint, a side below one patch
            raise SystemExit(str(error))
    metric = plotted_metric([rows[0] for rows in results.values()], args.metric)
    os.makedirs(args.out, exist_ok=True)
    with open(osp.join(args.out, 'resolution_sweep.json'), 'w') as f:
        json.dump(dict(settings=vars(args), metric=metric, results=results), f, indent=1)
    plot(results, metric, osp.join(args.out, 'resolution_sweep.png'))
    print(f'wrote {args.out}/resolution_sweep.json and resolution_sweep.png')


if __name__ == '__main__':
    main()
