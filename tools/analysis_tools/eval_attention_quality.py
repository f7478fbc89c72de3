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
  for "inside a ground-truth box"; ROC-AUC (Mann-Whitney, ties counted half) and average
  precision per image, averaged over the images that have pixels both in and out of boxes.
- **Random baseline** (``--saliency random``): every patch gets a uniform random score
  (seeded by ``--seed``), so MoRF and LeRF remove the patches in a random order (LeRF in the
  reverse of MoRF's) and the box AUCs are those of a map that knows nothing: ROC-AUC near 50,
  PR-AUC near the share of box pixels. A classifier without an attention map (InfViT with
  ``attn_type='none'``, no token mixing) is scored only this way: with the default
  ``--saliency attention`` the tool refuses it.

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
import xml.etree.ElementTree as ET
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from PIL import Image
from torch import Tensor, nn

from mmlinear.apis import build_classifier, input_normalization, list_images, load_images
from mmlinear.models.utils import patch_grid
from mmlinear.utils.progress import ProgressETA
from mmlinear.visualization import QUERY_MODES, attention_saliency, upsample_saliency

ORDERS = ('morf', 'lerf')
#: Where the patch scores come from: the backbone's attention, or a seeded random order.
SALIENCY_SOURCES = ('attention', 'random')


# ----------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------
def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties half.

    Args:
        scores (np.ndarray): (M,) real scores.
        labels (np.ndarray): (M,) bool, True for positives.

    Returns:
        float: ROC-AUC in [0, 1], nan without both classes.
    """
    scores, labels = np.asarray(scores, float).ravel(), np.asarray(labels, bool).ravel()
    pos, neg = labels.sum(), (~labels).sum()
    if pos == 0 or neg == 0:
        return float('nan')
    # Average ranks (1-based) of tied scores give the Mann-Whitney U with ties counted half.
    order = np.argsort(scores, kind='mergesort')
    sorted_scores = scores[order]
    ranks = np.empty(len(scores))
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    for start, count in zip(first, counts):
        ranks[order[start:start + count]] = start + (count + 1) / 2
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * neg))


def average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the precision-recall curve as average precision (step-wise, tied scores
    form one threshold).

    Args:
        scores (np.ndarray): (M,) real scores.
        labels (np.ndarray): (M,) bool, True for positives.

    Returns:
        float: AP in [0, 1], nan without positives.
    """
    scores, labels = np.asarray(scores, float).ravel(), np.asarray(labels, bool).ravel()
    if labels.sum() == 0:
        return float('nan')
    order = np.argsort(-scores, kind='mergesort')
    scores, labels = scores[order], labels[order]
    # The last index of every run of equal scores is a threshold.
    last = np.r_[np.nonzero(np.diff(scores))[0], len(scores) - 1]
    true_pos = np.cumsum(labels)[last]
    precision = true_pos / (last + 1)
    recall = true_pos / labels.sum()
    return float(np.sum(np.diff(np.r_[0., recall]) * precision))


def area_over_curve(probs: Sequence[float]) -> float:
    """AOC in percent of a perturbation curve p_0, p_1..p_L (see the module docstring)."""
    probs = np.asarray(probs, float)
    if len(probs) < 2:
        raise ValueError('a perturbation curve needs p_0 and at least one step')
    return float(np.mean(probs[0] - probs[1:]) / max(probs[0], 1e-12) * 100)


# ----------------------------------------------------------------------------------------
# Boxes
# ----------------------------------------------------------------------------------------
def load_boxes(source: str, files: Sequence[str]) -> Dict[str, List[List[float]]]:
    """Boxes (x1, y1, x2, y2 in the original pixels) per image file.

    Args:
        source (str): A COCO json, or a folder of VOC/ImageNet XML files named like the
            images (``n01751748_123.xml`` for ``n01751748_123.JPEG``).
        files (Sequence[str]): The image paths.

    Returns:
        dict: image path -> list of boxes (empty when the image has none).
    """
    boxes = {}
    if source.endswith('.json'):
        with open(source) as f:
            coco = json.load(f)
        by_name = {im['file_name']: im['id'] for im in coco['images']}
        per_id: Dict[int, list] = {}
        for ann in coco['annotations']:
            x, y, w, h = ann['bbox']
            per_id.setdefault(ann['image_id'], []).append([x, y, x + w, y + h])
        for file in files:
            name = osp.basename(file)
            if name not in by_name:
                raise ValueError(f'{name} is not an image of {source}')
            boxes[file] = per_id.get(by_name[name], [])
        return boxes
    if not osp.isdir(source):
        raise FileNotFoundError(f'--boxes must be a COCO .json or a folder of XMLs: {source}')
    for file in files:
        xml = osp.join(source, osp.splitext(osp.basename(file))[0] + '.xml')
        if not osp.isfile(xml):
            raise FileNotFoundError(f'no box file {xml} for {file}')
        root = ET.parse(xml).getroot()
        boxes[file] = [[
            float(obj.find(f'bndbox/{k}').text) for k in ('xmin', 'ymin', 'xmax', 'ymax')
        ] for obj in root.iter('object')]
    return boxes


def box_mask(boxes: List[List[float]], orig_hw: Tuple[int, int],
             shown_hw: Tuple[int, int]) -> np.ndarray:
    """(H, W) bool mask of the pixels inside any box, boxes rescaled to the shown size."""
    mask = np.zeros(shown_hw, bool)
    sy, sx = shown_hw[0] / orig_hw[0], shown_hw[1] / orig_hw[1]
    for x1, y1, x2, y2 in boxes:
        mask[int(np.floor(y1 * sy)):int(np.ceil(y2 * sy)),
             int(np.floor(x1 * sx)):int(np.ceil(x2 * sx))] = True
    return mask


# ----------------------------------------------------------------------------------------
# Perturbation
# ----------------------------------------------------------------------------------------
@torch.no_grad()
def perturbation_curve(classifier: nn.Module, x: Tensor, saliency: Tensor, order: str, steps: int,
                       patch_size: int) -> Tensor:
    """Probability of the originally predicted class as patches are removed.

    Args:
        classifier (nn.Module): Maps (B, 3, H, W) to (B, classes) logits.
        x (Tensor): (B, 3, H, W) normalised images (0 is the mean colour).
        saliency (Tensor): (B, h, w) patch saliency.
        order (str): 'morf' (most relevant first) or 'lerf'.
        steps (int): Number of removal steps L.
        patch_size (int): Patch side p (h = ceil(H / p)).

    Returns:
        Tensor: (B, L + 1) probabilities, the intact image first.
    """
    if order not in ORDERS:
        raise ValueError(f'unknown order {order!r}; allowed: {", ".join(ORDERS)}')
    B, _, H, W = x.shape
    h, w = saliency.shape[1:]
    probs = classifier(x).softmax(-1)
    target = probs.argmax(-1)
    curve = [probs.gather(1, target[:, None])[:, 0]]
    ranking = saliency.flatten(1).argsort(dim=1, descending=order == 'morf', stable=True)
    for k in range(1, steps + 1):
        removed = torch.zeros(B, h * w, dtype=torch.bool)
        count = round(k / steps * h * w)
        removed.scatter_(1, ranking[:, :count], True)
        pixel_mask = removed.view(B, 1, h, w).repeat_interleave(patch_size, 2) \
            .repeat_interleave(patch_size, 3)[..., :H, :W]
        probs = classifier(x.masked_fill(pixel_mask, 0.)).softmax(-1)
        curve.append(probs.gather(1, target[:, None])[:, 0])
    return torch.stack(curve, 1)


def check_saliency_source(backbone: nn.Module, source: str, config: str) -> None:
    """Refuse an attention saliency of a backbone that mixes no tokens.

    Args:
        backbone (nn.Module): The classifier's backbone.
        source (str): One of ``SALIENCY_SOURCES``.
        config (str): The config it was built from, named in the error.

    Raises:
        ValueError: If ``source`` is unknown, or is 'attention' for InfViT with
            ``attn_type='none'`` (whose layers return no attention weights).
    """
    if source not in SALIENCY_SOURCES:
        raise ValueError(f'unknown saliency {source!r}; allowed: {", ".join(SALIENCY_SOURCES)}')
    if source == 'attention' and getattr(backbone, 'attn_type', None) == 'none':
        raise ValueError(f"{config} builds attn_type 'none' (no token mixing), which has no "
                         f'attention map to score; --saliency random scores it with a seeded '
                         f'random patch order, the baseline every attention map is compared '
                         f'with (allowed --saliency: {", ".join(SALIENCY_SOURCES)})')


def evaluate(model: nn.Module, files: List[str], boxes: Dict[str, list], args) -> dict:
    """All metrics for the images, in batches."""
    mean, std = input_normalization(args.config)
    # One generator for the whole run: the random scores depend on --seed and the batching.
    generator = torch.Generator().manual_seed(args.seed)

    def classify(images: Tensor) -> Tensor:
        return model(images, mode='tensor')

    per_image, curves = [], {order: [] for order in ORDERS}
    batches = [files[i:i + args.batch_size] for i in range(0, len(files), args.batch_size)]
    progress = ProgressETA(len(batches))
    for batch in batches:
        x, shown = load_images(batch, args.img_size, mean, std)
        grid = patch_grid(model.backbone, x.shape[-2:])
        if args.saliency == 'random':
            saliency = torch.rand((x.shape[0], *grid), generator=generator)
        else:
            saliency = attention_saliency(model.backbone, x, args.layer, args.query)
        patch = -(-x.shape[-1] // grid[1])
        for order in ORDERS:
            curves[order].append(
                perturbation_curve(classify, x, saliency, order, args.steps, patch))
        pixel_saliency = upsample_saliency(saliency, x.shape[-2:]).numpy()
        for i, file in enumerate(batch):
            with Image.open(file) as image:
                orig_hw = image.size[::-1]
            mask = box_mask(boxes[file], orig_hw, shown[i].shape[:2])
            per_image.append(
                dict(
                    file=osp.basename(file),
                    num_boxes=len(boxes[file]),
                    morf_aoc=area_over_curve(curves['morf'][-1][i].tolist()),
                    lerf_aoc=area_over_curve(curves['lerf'][-1][i].tolist()),
                    bbox_roc_auc=roc_auc(pixel_saliency[i], mask),
                    bbox_pr_auc=average_precision(pixel_saliency[i], mask)))
        progress.step(f'{len(per_image)}/{len(files)} images')
    summary = {}
    for key in ('morf_aoc', 'lerf_aoc', 'bbox_roc_auc', 'bbox_pr_auc'):
        values = [r[key] for r in per_image if not np.isnan(r[key])]
        scale = 100 if key.startswith('bbox') else 1  # AUCs in percent, like the paper
        summary[key] = float(np.mean(values)) * scale if values else float('nan')
        summary[f'{key}_images'] = len(values)
    mean_curves = {order: torch.cat(c).mean(0).tolist() for order, c in curves.items()}
    return dict(summary=summary, mean_curves=mean_curves, per_image=per_image)


def plot_curves(mean_curves: Dict[str, List[float]], path: str, title: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for order, curve in mean_curves.items():
        fractions = np.linspace(0, 100, len(curve))
        ax.plot(fractions, curve, marker='o', ms=3, label=order.upper())
    ax.set_xlabel('patches removed (%)')
    ax.set_ylabel('probability of the predicted class')
    ax.set_title(title, fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


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
    result = evaluate(model, files, boxes, args)
    os.makedirs(args.out, exist_ok=True)
    settings = vars(args)
    with open(osp.join(args.out, 'quality.json'), 'w') as f:
        json.dump(dict(settings=settings, **result), f, indent=1)
    s = result['summary']
    name = osp.splitext(osp.basename(args.config))[0]
    if args.saliency == 'random':
        name += ' (random patch order)'
    plot_curves(result['mean_curves'], osp.join(args.out, 'curves.png'),
                f'{name}: MoRF-AOC {s["morf_aoc"]:.1f}, LeRF-AOC {s["lerf_aoc"]:.1f}')
    print(f'{name} on {len(files)} images: MoRF-AOC {s["morf_aoc"]:.2f} (higher is better), '
          f'LeRF-AOC {s["lerf_aoc"]:.2f} (lower is better), bbox ROC-AUC '
          f'{s["bbox_roc_auc"]:.2f}, bbox PR-AUC {s["bbox_pr_auc"]:.2f} '
          f'({s["bbox_roc_auc_images"]} images with boxes)')
    print(f'wrote {args.out}/quality.json and curves.png')


if __name__ == '__main__':
    main()
