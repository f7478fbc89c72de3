"""Spectral alignment of an InfViT classifier: per layer and head, Linear-InfSA's key weights
against the left Perron vector of the full InfSA operator on the same tokens.

The InfSA paper reports a cosine of 0.985 between the two on trained weights. A plain cosine
of two positive vectors is close to 1 for almost any pair, so this tool reports it beside the
cosine a uniform vector reaches (the baseline it must beat), and the two measures that are
not inflated: the cosine of the centred vectors and the Spearman rank correlation
(:mod:`mmlinear.visualization.spectral_alignment`). The images are resized to one square
side; the metrics are averaged over them, leaving out a head on an image where its operator
has no Perron vector (a nilpotent ReLU affinity, which trained heads can have); how many were
left out is printed and saved.

Example::

    python tools/analysis_tools/spectral_alignment.py \\
        configs/demo/infvit-demo-linear_shapes-cls.py \\
        --checkpoint $(cat work_dirs/demo/infvit-demo-linear_shapes-cls/last_checkpoint) \\
        --images data/shapes/cls/val --max-images 32 --img-size 64 \\
        --out work_dirs/spectral_alignment

Writes ``alignment.json`` (per layer and head, and the means) and ``alignment.png`` (the four
measures per layer) under ``--out``.
"""
import argparse
import inspect
import json
import os
import os.path as osp
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from mmengine.config import Config

from mmlinear.apis import build_classifier, input_normalization, list_images, load_images
from mmlinear.models import InfViT
from mmlinear.utils.progress import ProgressETA
from mmlinear.visualization import spectral_alignment

METRICS = ('centred_cosine', 'spearman', 'cosine', 'uniform_cosine')
#: What a config that does not name the attention type builds.
DEFAULT_ATTN_TYPE = inspect.signature(InfViT).parameters['attn_type'].default


def config_attn_type(cfg: Config) -> str:
    """The ``attn_type`` a config's backbone is built with (InfViT's default if unnamed)."""
    return cfg.model.backbone.get('attn_type', DEFAULT_ATTN_TYPE)


def trained_attn_type(checkpoint: str) -> Optional[str]:
    """The ``attn_type`` of the backbone a checkpoint was trained with, read from the config
    mmengine's runner saves in its meta; None when the checkpoint carries no config."""
    from mmengine.runner.checkpoint import _load_checkpoint
    cfg_text = (_load_checkpoint(checkpoint, map_location='cpu').get('meta') or {}).get('cfg')
    return config_attn_type(Config.fromstring(cfg_text, '.py')) if cfg_text else None


def measure(model, files: List[str], args: argparse.Namespace) -> Dict[str, List]:
    """Per layer and head, each metric averaged over the images (normalised as the
    config's data preprocessor normalises them) on which the head's operator has a Perron
    vector.

    Returns:
        dict[str, list]: metric -> (layers, heads) nested lists (NaN for a head without a
        Perron vector on any image), and ``defined``: the images each mean is over.
    """
    mean, std = input_normalization(args.config)
    img_size, batch_size = args.img_size, args.batch_size
    sums: Optional[Dict[str, torch.Tensor]] = None
    defined: Optional[torch.Tensor] = None
    batches = [files[i:i + batch_size] for i in range(0, len(files), batch_size)]
    progress = ProgressETA(len(batches))
    done = 0
    for batch in batches:
        x, _ = load_images(batch, img_size, mean, std)
        layers = spectral_alignment(model.backbone, x)
        # (layers, B, H) per metric, summed over the images where the operator has a Perron
        # vector (NaN elsewhere, for every metric alike).
        stacked = {m: torch.stack([layer[m] for layer in layers]) for m in METRICS}
        totals = {m: values.nansum(1) for m, values in stacked.items()}
        counts = (~stacked['spearman'].isnan()).sum(1)
        sums = totals if sums is None else {m: sums[m] + totals[m] for m in METRICS}
        defined = counts if defined is None else defined + counts
        done += len(batch)
        progress.step(f'{done}/{len(files)} images')
    result = {m: (sums[m] / defined).tolist() for m in METRICS}
    result['defined'] = defined.tolist()
    return result


def plot(per_head: Dict[str, List], path: str, title: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.2))
    layers = np.arange(1, len(per_head['cosine']) + 1)
    for metric in METRICS:
        ax.plot(
            layers,
            np.nanmean(per_head[metric], axis=1),
            marker='o',
            ms=3,
            label=metric.replace('_', ' '))
    ax.set_xticks(layers)
    ax.set_xlabel('layer')
    ax.set_ylabel('mean over heads and images')
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config', help='InfViT classifier config (attn_type linear or pure)')
    parser.add_argument('--checkpoint', default=None, help='without it: random weights')
    parser.add_argument('--images', nargs='+', required=True, help='image files or folders')
    parser.add_argument('--max-images', type=int, default=None)
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--batch-size', type=int, default=16)
    parser.add_argument(
        '--seed', type=int, default=0, help='seeds the initial weights when no checkpoint is given')
    parser.add_argument('--out', default='work_dirs/spectral_alignment')
    args = parser.parse_args(argv)
    if args.batch_size < 1 or args.img_size < 1:
        raise SystemExit('--batch-size and --img-size must be positive')
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmlinear_spectral_alignment', log_level='WARNING')
    files = list_images(args.images, args.max_images)
    # Before loading: a checkpoint of another attention type may load without a missing key.
    attn_type = config_attn_type(Config.fromfile(args.config))
    trained = trained_attn_type(args.checkpoint) if args.checkpoint else None
    if trained is not None and trained != attn_type:
        raise SystemExit(f'{args.checkpoint} was trained with attn_type {trained!r}, but '
                         f'{args.config} builds {attn_type!r}: give the config it was trained '
                         'with')
    torch.manual_seed(args.seed)  # random weights, without a checkpoint, are then the same
    model = build_classifier(args.config, args.checkpoint)
    patch = model.backbone.patch_size
    if args.img_size < patch:
        raise SystemExit(f'--img-size {args.img_size} is smaller than one patch ({patch} px)')
    try:
        per_head = measure(model, files, args)
    except ValueError as e:  # not an InfSA backbone: the message names what is allowed
        raise SystemExit(str(e))
    means = {m: float(np.nanmean(per_head[m])) for m in METRICS}
    operators = len(files) * np.size(per_head['defined'])  # (image, layer, head)
    undefined = operators - int(np.sum(per_head['defined']))
    os.makedirs(args.out, exist_ok=True)
    with open(osp.join(args.out, 'alignment.json'), 'w') as f:
        json.dump(
            dict(settings=vars(args), images=len(files), mean=means, per_head=per_head),
            f,
            indent=1)
    name = osp.splitext(osp.basename(args.config))[0]
    plot(per_head, osp.join(args.out, 'alignment.png'), name)
    print(f'{name} on {len(files)} images, mean over layers and heads: centred cosine '
          f'{means["centred_cosine"]:.3f}, Spearman {means["spearman"]:.3f}, cosine '
          f'{means["cosine"]:.3f} (a uniform vector: {means["uniform_cosine"]:.3f}); left out: '
          f'{undefined} of {operators} (image, layer, head) operators without a Perron vector '
          '(nilpotent)')
    for layer, values in enumerate(zip(*(per_head[m] for m in METRICS)), 1):
        shown = ', '.join(f'{m} {np.nanmean(v):.3f}' for m, v in zip(METRICS, values))
        print(f'  layer {layer}: {shown}')


if __name__ == '__main__':
    main()
