"""Attention quality of a classifier: MoRF / LeRF area over the perturbation curve and
bounding-box ROC-AUC / PR-AUC of its attention maps, the metrics of the InfViT paper's
attention-quality table (Roffo and Palmer, arXiv:2603.00175).

The saliency of every patch is :func:`mmlinear.visualization.attention_saliency` of the
classifier's backbone (attention received at ``--layer``, or WeightFormer's dynamic
convolution response). The paper names the metrics but does not spell out the protocol (which
layer, how many steps, how the map is upsampled); the choices made here, all options:

- **MoRF / LeRF**: patches are removed (set to the normalisation mean, i.e. 0 after
  normalising) most-relevant-first or least-relevant-first, in ``--steps`` equal fractions of
  the patches. The score is the softmax probability of the class predicted on the intact
  image. AOC = mean over the steps k = 1..L of (p_0 - p_k) / p_0, in percent (the area
  between the flat line p_0 and the curve, relative to p_0). MoRF-AOC: higher is better;
  LeRF-AOC: lower is better.
- **Bbox ROC-AUC / PR-AUC**: the saliency upsampled (bilinear) to the image is a pixel score
  for "inside a ground-truth box"; ROC-AUC (Mann-Whitney, ties counted half) and PR-AUC as
  average precision (step-wise, scikit-learn's) per image, averaged over the images that have
  pixels both in and out of boxes.
- **Random baseline** (``--saliency random``): every patch gets a uniform random score
  (seeded by ``--seed``), so MoRF and LeRF remove the patches in a random order (LeRF in the
  reverse of MoRF's) and the box AUCs are those of a map that knows nothing: ROC-AUC near 50,
  PR-AUC near the share of box pixels. A classifier without an attention map (InfViT with
  ``attn_type='none'``, no token mixing) is scored only this way: with the default
  ``--saliency attention`` the tool refuses it.

The metrics and the evaluation loop are :mod:`mmlinear.evaluation.attention_quality`'s; this
script parses the options, builds the classifier, writes the results and prints the summary.

Without ``--checkpoint`` the classifier keeps its initial weights, drawn after seeding torch
with ``--seed``, so a random-weight run is repeatable.

Boxes come from ImageNet-style (Pascal VOC) XML files named like the images, or a COCO json.

Writes ``--out``/quality.json (per-image values, mean curves) and curves.png.

Example:
    python tools/analysis_tools/eval_attention_quality.py \\
        configs/demo/infvit-demo-linear_shapes-cls.py --checkpoint CKPT \\
        --images data/shapes/coco/images/val \\
        --boxes data/shapes/coco/annotations/instances_val.json --img-size 64
    python tools/analysis_tools/eval_attention_quality.py \\
        configs/demo/infvit-demo-none_shapes-cls.py --checkpoint CKPT --saliency random \\
        --images data/shapes/coco/images/val \\
        --boxes data/shapes/coco/annotations/instances_val.json --img-size 64
"""
import argparse
import json
import os
import os.path as osp
from typing import Optional, Sequence

import torch

from mmlinear.apis import build_classifier, input_normalization, list_images
from mmlinear.evaluation import (SALIENCY_SOURCES, check_saliency_source,
                                 evaluate_attention_quality, load_boxes, plot_perturbation_curves)
from mmlinear.visualization import QUERY_MODES


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config', help='classifier config (mmpretrain ImageClassifier)')
    parser.add_argument('--checkpoint', default=None, help='without it: random weights')
    parser.add_argument('--images', nargs='+', required=True, help='image files or folders')
    parser.add_argument(
        '--boxes', required=True, help='COCO json, or a folder of VOC/ImageNet XML files')
    parser.add_argument('--max-images', type=int, default=None)
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--batch-size', type=int, default=16)
    parser.add_argument('--steps', type=int, default=10, help='perturbation steps L')
    parser.add_argument('--layer', type=int, default=-1)
    parser.add_argument('--query', default='mean', choices=QUERY_MODES)
    parser.add_argument(
        '--saliency',
        default='attention',
        choices=SALIENCY_SOURCES,
        help="the backbone's attention maps, or a seeded random patch order (the baseline; "
        "the only score of a model with attn_type 'none')")
    parser.add_argument(
        '--seed',
        type=int,
        default=0,
        help='seeds the initial weights when no checkpoint is given, and --saliency random')
    parser.add_argument('--out', default='work_dirs/attention_quality')
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1:
        raise SystemExit('--steps and --batch-size must be positive')
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmlinear_attention_quality', log_level='WARNING')
    files = list_images(args.images, args.max_images)
    boxes = load_boxes(args.boxes, files)
    torch.manual_seed(args.seed)  # random weights, without a checkpoint, are then the same
    model = build_classifier(args.config, args.checkpoint)
    try:
        check_saliency_source(model.backbone, args.saliency, args.config)
    except ValueError as error:
        raise SystemExit(str(error))
    mean, std = input_normalization(args.config)
    result = evaluate_attention_quality(
        model,
        files,
        boxes,
        mean,
        std,
        args.img_size,
        batch_size=args.batch_size,
        steps=args.steps,
        layer=args.layer,
        query=args.query,
        saliency=args.saliency,
        seed=args.seed)
    os.makedirs(args.out, exist_ok=True)
    settings = vars(args)
    with open(osp.join(args.out, 'quality.json'), 'w') as f:
        json.dump(dict(settings=settings, **result), f, indent=1)
    s = result['summary']
    name = osp.splitext(osp.basename(args.config))[0]
    if args.saliency == 'random':
        name += ' (random patch order)'
    plot_perturbation_curves(result['mean_curves'], osp.join(args.out, 'curves.png'),
                             f'{name}: MoRF-AOC {s["morf_aoc"]:.1f}, LeRF-AOC {s["lerf_aoc"]:.1f}')
    print(f'{name} on {len(files)} images: MoRF-AOC {s["morf_aoc"]:.2f} (higher is better), '
          f'LeRF-AOC {s["lerf_aoc"]:.2f} (lower is better), bbox ROC-AUC '
          f'{s["bbox_roc_auc"]:.2f}, bbox PR-AUC {s["bbox_pr_auc"]:.2f} '
          f'({s["bbox_roc_auc_images"]} images with boxes)')
    print(f'wrote {args.out}/quality.json and curves.png')


if __name__ == '__main__':
    main()
