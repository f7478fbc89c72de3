"""Attention quality of a classifier: MoRF / LeRF area over the perturbation curve and
bounding-box ROC-AUC / PR-AUC of its saliency maps, the metrics of the InfViT paper's
attention-quality table (Roffo and Palmer, arXiv:2603.00175).

The paper names the metrics but does not spell out the protocol; the choices made here:

- **MoRF / LeRF** (:func:`perturbation_curve`, :func:`area_over_curve`): patches are removed
  (set to 0, the normalisation mean) most-relevant-first or least-relevant-first, in ``steps``
  equal fractions of the patches. The score is the softmax probability of the class predicted
  on the intact image. AOC = mean over the steps k = 1..L of (p_0 - p_k) / p_0, in percent
  (the area between the flat line p_0 and the curve, relative to p_0). MoRF-AOC: higher is
  better; LeRF-AOC: lower is better.
- **Bbox ROC-AUC / PR-AUC** (:func:`roc_auc`, :func:`average_precision`): the saliency
  upsampled (bilinear) to the image is a pixel score for "inside a ground-truth box"
  (:func:`box_mask`); ROC-AUC (ties counted half) and PR-AUC as average precision (step-wise,
  not the trapezoidal area), both from scikit-learn, per image, averaged over the images that
  have pixels both in and out of boxes.
- **Random baseline** (saliency ``'random'``): every patch gets a uniform random score, so MoRF
  and LeRF remove the patches in a random order (LeRF in the reverse of MoRF's) and the box
  AUCs are those of a map that knows nothing: ROC-AUC near 50, PR-AUC near the share of box
  pixels.
"""
import json
import os.path as osp
import xml.etree.ElementTree as ET
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np
import torch
from PIL import Image
from sklearn.metrics import average_precision_score, roc_auc_score
from torch import Tensor, nn

from mmlinear.apis import load_images
from mmlinear.models.utils import patch_grid
from mmlinear.utils.progress import ProgressETA
from mmlinear.visualization import attention_saliency, upsample_saliency

#: The removal orders: most relevant first, least relevant first.
ORDERS = ('morf', 'lerf')
#: Where the patch scores come from: the backbone's attention, or a seeded random order.
SALIENCY_SOURCES = ('attention', 'random')
#: The per-image metrics, in the order of the records of :func:`evaluate_attention_quality`.
METRICS = ('morf_aoc', 'lerf_aoc', 'bbox_roc_auc', 'bbox_pr_auc')


def _scores_and_labels(scores: np.ndarray, labels: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``scores`` as a flat float64 array and ``labels`` as a flat bool one."""
    return np.asarray(scores, float).ravel(), np.asarray(labels, bool).ravel()


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties counted
    half (:func:`sklearn.metrics.roc_auc_score`).

    Args:
        scores (np.ndarray): (M,) real scores (any shape, flattened).
        labels (np.ndarray): (M,) bool, True for positives.

    Returns:
        float: ROC-AUC in [0, 1], nan without both classes.
    """
    scores, labels = _scores_and_labels(scores, labels)
    if labels.all() or not labels.any():
        return float('nan')
    return float(roc_auc_score(labels, scores))


def average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the precision-recall curve as average precision
    (:func:`sklearn.metrics.average_precision_score`): the sum over the thresholds of the
    precision times the recall gained, step-wise (not the trapezoidal area), tied scores
    forming one threshold.

    Args:
        scores (np.ndarray): (M,) real scores (any shape, flattened).
        labels (np.ndarray): (M,) bool, True for positives.

    Returns:
        float: AP in [0, 1], nan without positives.
    """
    scores, labels = _scores_and_labels(scores, labels)
    if not labels.any():
        return float('nan')
    return float(average_precision_score(labels, scores))


def area_over_curve(probs: Sequence[float]) -> float:
    """Area over a perturbation curve, in percent.

    Args:
        probs (Sequence[float]): (L + 1,) probabilities p_0 (intact image), p_1..p_L.

    Returns:
        float: mean over k = 1..L of (p_0 - p_k) / p_0, times 100.

    Raises:
        ValueError: If the curve has fewer than two points.
    """
    probs = np.asarray(probs, float)
    if len(probs) < 2:
        raise ValueError('a perturbation curve needs p_0 and at least one step')
    return float(np.mean(probs[0] - probs[1:]) / max(probs[0], 1e-12) * 100)


def load_boxes(source: str, files: Sequence[str]) -> Dict[str, List[List[float]]]:
    """Boxes (x1, y1, x2, y2 in the original pixels) per image file.

    Args:
        source (str): A COCO json, or a folder of VOC/ImageNet XML files named like the
            images (``n01751748_123.xml`` for ``n01751748_123.JPEG``).
        files (Sequence[str]): The image paths.

    Returns:
        dict[str, list[list[float]]]: image path -> its (4,) boxes (none when it has none).

    Raises:
        ValueError: If an image is not in the COCO json.
        FileNotFoundError: If ``source`` is neither a json nor a folder, or an image has no
            XML file.
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
    """The pixels inside any box, the boxes rescaled from the original to the shown size
    (every pixel a box touches counts).

    Args:
        boxes (list[list[float]]): (4,) boxes x1, y1, x2, y2 in the original pixels.
        orig_hw (tuple[int, int]): The original image's (H0, W0).
        shown_hw (tuple[int, int]): The shown image's (H, W).

    Returns:
        np.ndarray: (H, W) bool mask.
    """
    mask = np.zeros(shown_hw, bool)
    sy, sx = shown_hw[0] / orig_hw[0], shown_hw[1] / orig_hw[1]
    for x1, y1, x2, y2 in boxes:
        mask[int(np.floor(y1 * sy)):int(np.ceil(y2 * sy)),
             int(np.floor(x1 * sx)):int(np.ceil(x2 * sx))] = True
    return mask


@torch.no_grad()
def perturbation_curve(classifier: Callable[[Tensor], Tensor], x: Tensor, saliency: Tensor,
                       order: str, steps: int, patch_size: int) -> Tensor:
    """Probability of the originally predicted class as patches are removed.

    Args:
        classifier (Callable[[Tensor], Tensor]): Maps (B, 3, H, W) to (B, classes) logits.
        x (Tensor): (B, 3, H, W) normalised images (0 is the mean colour).
        saliency (Tensor): (B, h, w) patch saliency.
        order (str): 'morf' (most relevant first) or 'lerf'.
        steps (int): Number of removal steps L.
        patch_size (int): Patch side p (h = ceil(H / p)).

    Returns:
        Tensor: (B, L + 1) probabilities, the intact image first.

    Raises:
        ValueError: If ``order`` is not one of :data:`ORDERS`.
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
        source (str): One of :data:`SALIENCY_SOURCES`.
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


def evaluate_attention_quality(model: nn.Module,
                               files: List[str],
                               boxes: Dict[str, List[List[float]]],
                               mean: Sequence[float],
                               std: Sequence[float],
                               img_size: int,
                               batch_size: int = 16,
                               steps: int = 10,
                               layer: int = -1,
                               query: str = 'mean',
                               saliency: str = 'attention',
                               seed: int = 0) -> dict:
    """Every metric of a classifier on the images, in batches, logging a line per batch.

    Args:
        model (nn.Module): An mmpretrain classifier (``model(x, mode='tensor')`` gives the
            logits) with a ``backbone``.
        files (list[str]): The image paths.
        boxes (dict[str, list[list[float]]]): Each image's boxes (:func:`load_boxes`).
        mean (Sequence[float]): RGB mean on the 0-255 scale.
        std (Sequence[float]): RGB standard deviation on the 0-255 scale.
        img_size (int): Square side the images are resized to.
        batch_size (int): Images per batch. Defaults to 16.
        steps (int): Perturbation steps L. Defaults to 10.
        layer (int): The layer whose attention is the saliency. Defaults to -1.
        query (str): How the queries' attention is combined
            (:data:`mmlinear.visualization.QUERY_MODES`). Defaults to 'mean'.
        saliency (str): One of :data:`SALIENCY_SOURCES`. Defaults to 'attention'.
        seed (int): Seeds the random saliency: its scores depend on the seed and the
            batching. Defaults to 0.

    Returns:
        dict: ``summary`` (the mean of every metric of :data:`METRICS` over the images where
        it is defined, the box AUCs in percent, and ``<metric>_images``, their number),
        ``mean_curves`` (order -> (L + 1,) mean probabilities) and ``per_image`` (one record
        per image: ``file``, ``num_boxes`` and the metrics, AUCs in [0, 1]).
    """
    # One generator for the whole run: the random scores depend on the seed and the batching.
    generator = torch.Generator().manual_seed(seed)

    def classify(images: Tensor) -> Tensor:
        return model(images, mode='tensor')

    per_image, curves = [], {order: [] for order in ORDERS}
    batches = [files[i:i + batch_size] for i in range(0, len(files), batch_size)]
    progress = ProgressETA(len(batches))
    for batch in batches:
        x, shown = load_images(batch, img_size, mean, std)
        grid = patch_grid(model.backbone, x.shape[-2:])
        if saliency == 'random':
            patch_scores = torch.rand((x.shape[0], *grid), generator=generator)
        else:
            patch_scores = attention_saliency(model.backbone, x, layer, query)
        patch = -(-x.shape[-1] // grid[1])
        for order in ORDERS:
            curves[order].append(perturbation_curve(classify, x, patch_scores, order, steps, patch))
        pixel_saliency = upsample_saliency(patch_scores, x.shape[-2:]).numpy()
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
    for key in METRICS:
        values = [r[key] for r in per_image if not np.isnan(r[key])]
        scale = 100 if key.startswith('bbox') else 1  # AUCs in percent, like the paper
        summary[key] = float(np.mean(values)) * scale if values else float('nan')
        summary[f'{key}_images'] = len(values)
    mean_curves = {order: torch.cat(c).mean(0).tolist() for order, c in curves.items()}
    return dict(summary=summary, mean_curves=mean_curves, per_image=per_image)


def plot_perturbation_curves(mean_curves: Dict[str, List[float]], path: str, title: str) -> None:
    """Draw the mean MoRF / LeRF curves against the share of patches removed.

    Args:
        mean_curves (dict[str, list[float]]): Order -> (L + 1,) mean probabilities, as
            :func:`evaluate_attention_quality` gives them.
        path (str): The image file written.
        title (str): The plot's title.
    """
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
