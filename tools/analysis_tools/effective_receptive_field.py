"""Effective receptive fields of backbones before and after training (the WeightFormer paper's
Figure 3).

For every config (classification, segmentation or detection: its ``model.backbone`` is
built, with ``out_type='featmap'``; or a backbone preset such as ``deit-t-sdpa``) the map is
measured at the initial weights (seeded by ``--seed``) and, where ``--checkpoints`` gives one,
at the trained weights (the checkpoint's backbone, loaded strictly): the absolute gradient of
the central position of the chosen feature map (its channels' positive parts summed) with
respect to the input, summed over the input channels and over the images
(:mod:`mmlinear.visualization.effective_receptive_field`). The images are resized to
``--img-size`` squares and normalised as the config's data preprocessor normalises them.

Example::

    python tools/analysis_tools/effective_receptive_field.py \\
        configs/demo/weightformer-demo_shapes-cls.py configs/demo/veca-demo_shapes-cls.py \\
        --checkpoints $(cat work_dirs/weightformer/last_checkpoint) none \\
        --images data/shapes/cls/val --max-images 50 --img-size 64 --out work_dirs/erf

Writes ``erf.json`` (per model and weights: the map's size and its high-contribution area
ratios, the smallest fraction of the pixels that holds each ``--thresholds`` share of the
total) and ``erf.png`` (one log-scaled heatmap per model and weights: a row per model, its
initial and trained weights side by side) under ``--out``.
"""
import argparse
import json
import os
import os.path as osp
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from mmlinear.apis import input_normalization, list_images, load_images
from mmlinear.cli import pair_checkpoints
from mmlinear.utils.progress import ProgressETA
from mmlinear.visualization import (DEFAULT_THRESHOLDS, area_ratios, build_featmap_backbone,
                                    effective_receptive_field)

#: The heatmaps show this many decades below each map's maximum.
LOG_DECADES = 4


def patch_side(backbone: nn.Module) -> int:
    """The patch side of an mmlinear backbone or of mmpretrain's VisionTransformer."""
    if hasattr(backbone, 'patch_size'):
        return int(backbone.patch_size)
    return int(backbone.patch_embed.projection.stride[0])


def measure(backbone: nn.Module, files: List[str], mean: Sequence[float], std: Sequence[float],
            args: argparse.Namespace, progress: ProgressETA, label: str) -> Tensor:
    """The (S, S) effective receptive field accumulated over ``files`` in batches."""
    total = torch.zeros(args.img_size, args.img_size)
    done = 0
    for start in range(0, len(files), args.batch_size):
        batch = files[start:start + args.batch_size]
        x, _ = load_images(batch, args.img_size, mean, std)
        total += effective_receptive_field(backbone, x, args.out_index)
        done += len(batch)
        progress.step(f'{label}: {done}/{len(files)} images')
    return total


def plot(maps: Dict[str, Dict[str, np.ndarray]], ratios: Dict[str, Dict[str, dict]],
         path: str) -> None:
    """A grid of log-scaled heatmaps: a row per model, a column per weights."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    columns = ['initial', 'trained'] if any('trained' in m for m in maps.values()) else ['initial']
    fig, axes = plt.subplots(
        len(maps),
        len(columns),
        figsize=(2.8 * len(columns) + 0.8, 2.9 * len(maps)),
        squeeze=False,
        constrained_layout=True)
    for row, (name, by_weights) in enumerate(maps.items()):
        for col, weights in enumerate(columns):
            ax = axes[row, col]
            ax.set_xticks([])
            ax.set_yticks([])
            if weights not in by_weights:
                ax.set_axis_off()
                continue
            erf = by_weights[weights]
            # Relative to the map's own maximum, so the initial and trained maps compare by
            # their shape rather than by their gradients' scale.
            shown = np.log10(np.maximum(erf / erf.max(), 10.0**-LOG_DECADES))
            image = ax.imshow(shown, cmap='viridis', vmin=-LOG_DECADES, vmax=0)
            shares = [f'{float(t):.0%}: {r:.3f}' for t, r in ratios[name][weights].items()]
            lines = [', '.join(shares[i:i + 2]) for i in range(0, len(shares), 2)]
            ax.set_title('\n'.join([name, f'{weights} weights, area ratio'] + lines), fontsize=6)
    fig.colorbar(image, ax=axes, shrink=0.5, label='log10 (share of the maximum)')
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        'configs',
        nargs='+',
        help='config files (their model.backbone) or backbone presets (deit-t-sdpa, ...)')
    parser.add_argument(
        '--checkpoints',
        nargs='+',
        default=None,
        help="one per config: its trained model or backbone, or 'none' (initial weights only)")
    parser.add_argument('--images', nargs='+', required=True, help='image files or folders')
    parser.add_argument('--max-images', type=int, default=None)
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument(
        '--out-index',
        type=int,
        default=-1,
        help='which of the backbone\'s output maps (its out_indices) to take; default the last')
    parser.add_argument(
        '--thresholds',
        nargs='+',
        type=float,
        default=list(DEFAULT_THRESHOLDS),
        help='shares of the total contribution whose area ratios are reported, in (0, 1]')
    parser.add_argument('--seed', type=int, default=0, help='seeds the initial weights')
    parser.add_argument('--out', default='work_dirs/effective_receptive_field')
    args = parser.parse_args(argv)
    if args.batch_size < 1 or args.img_size < 1:
        raise SystemExit('--batch-size and --img-size must be positive')
    bad = [t for t in args.thresholds if not 0 < t <= 1]
    if bad:
        raise SystemExit(f'--thresholds must be shares in (0, 1], got {bad}')
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmlinear_effective_receptive_field', log_level='WARNING')
    try:
        files = list_images(args.images, args.max_images)
        checkpoints = pair_checkpoints(args.configs, args.checkpoints)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(str(error))
    names = [osp.splitext(osp.basename(c))[0] for c in args.configs]
    # Every model is built before any is measured, so a bad checkpoint or size is refused
    # before minutes of gradients.
    models = []
    for name, config, checkpoint in zip(names, args.configs, checkpoints):
        torch.manual_seed(args.seed)  # the same initial weights whatever the order
        try:
            weights = {'initial': build_featmap_backbone(config, None)}
            if checkpoint:
                weights['trained'] = build_featmap_backbone(config, checkpoint)
        except ValueError as error:
            raise SystemExit(str(error))
        patch = patch_side(weights['initial'])
        if args.img_size < patch:
            raise SystemExit(f'--img-size {args.img_size} is smaller than one patch of {name} '
                             f'({patch} px)')
        models.append((name, config, checkpoint, weights))
    steps = -(-len(files) // args.batch_size)
    progress = ProgressETA(steps * sum(len(weights) for *_, weights in models))
    maps: Dict[str, Dict[str, np.ndarray]] = {}
    ratios: Dict[str, Dict[str, dict]] = {}
    results: Dict[str, Dict[str, dict]] = {}
    for name, config, checkpoint, weights in models:
        mean, std = input_normalization(config)
        maps[name], ratios[name], results[name] = {}, {}, {}
        for label, backbone in weights.items():
            erf = measure(backbone, files, mean, std, args, progress, f'{name} {label}')
            try:
                shares = area_ratios(erf, args.thresholds)
            except ValueError as error:  # an all-zero map: the output ignores the input
                raise SystemExit(f'{name} ({label} weights): {error}')
            maps[name][label] = erf.numpy()
            ratios[name][label] = shares
            results[name][label] = dict(
                checkpoint=checkpoint if label == 'trained' else None,
                map_size=list(erf.shape),
                area_ratio={
                    str(t): r
                    for t, r in shares.items()
                })
    os.makedirs(args.out, exist_ok=True)
    with open(osp.join(args.out, 'erf.json'), 'w') as f:
        json.dump(dict(settings=vars(args), images=len(files), results=results), f, indent=1)
    plot(maps, ratios, osp.join(args.out, 'erf.png'))
    for name, by_weights in results.items():
        for label, result in by_weights.items():
            shown = ', '.join(f'{float(t):.0%} {r:.4f}' for t, r in result['area_ratio'].items())
            print(f'{name} {label}: area ratio {shown}')
    print(f'wrote {args.out}/erf.json and erf.png ({len(files)} images, {args.img_size} px)')


if __name__ == '__main__':
    main()
