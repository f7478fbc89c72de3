"""COCO mean average precision (box and mask) of detections on one large generated scene,
computed by pycocotools' ``COCOeval`` as mmdet's ``CocoMetric`` computes it, with the
detection caps raised to the scene's thousands of objects."""
import contextlib
import io
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import numpy as np

if TYPE_CHECKING:
    from pycocotools.cocoeval import COCOeval

#: The detections of the one image that count (COCO's own cap is 100, for images of a few
#: objects).
MAX_DETECTIONS = 100_000


def polygon_rle(polygon: Sequence[Tuple[float, float]], height: int, width: int) -> dict:
    """The COCO RLE of a polygon filled as PIL fills it (as the scenes are drawn).

    The polygon is drawn on a canvas of its bounding box only, then placed in a zero
    column-major mask of the image, so each call allocates one mask of the image.

    Args:
        polygon (Sequence[tuple[float, float]]): Vertices (x, y) in image pixels.
        height (int): Image rows.
        width (int): Image columns.

    Returns:
        dict: ``size`` [height, width] and ``counts`` (text).
    """
    from PIL import Image, ImageDraw
    from pycocotools import mask as mask_utils
    points = np.asarray(polygon, dtype=np.float64)
    x0, y0 = (int(v) for v in np.floor(points.min(0)).clip(0))
    x1 = min(int(np.ceil(points[:, 0].max())) + 1, width)
    y1 = min(int(np.ceil(points[:, 1].max())) + 1, height)
    canvas = Image.new('L', (x1 - x0, y1 - y0), 0)
    ImageDraw.Draw(canvas).polygon([(x - x0, y - y0) for x, y in polygon], fill=1)
    mask = np.zeros((height, width), dtype=np.uint8, order='F')
    mask[y0:y1, x0:x1] = np.asarray(canvas)
    return text_rle(mask_utils.encode(mask))


def polygons_rle(polygons: Sequence[Sequence[float]], height: int, width: int) -> dict:
    """The COCO RLE of the union of flat polygons [x1, y1, x2, y2, ...] (COCO's segmentation
    format, as SAHI gives its masks), rasterised by pycocotools."""
    from pycocotools import mask as mask_utils
    polygons = [list(map(float, p)) for p in polygons if len(p) >= 6]
    if not polygons:
        return text_rle(mask_utils.encode(np.zeros((height, width), dtype=np.uint8, order='F')))
    return text_rle(mask_utils.merge(mask_utils.frPyObjects(polygons, height, width)))


def text_rle(rle: dict) -> dict:
    """An RLE with its ``counts`` as text (JSON-writable), as mmdet writes them."""
    counts = rle['counts']
    return dict(
        size=list(rle['size']), counts=counts.decode() if isinstance(counts, bytes) else counts)


def summary_precision(evaluation: 'COCOeval', iou_index: Optional[int] = None) -> float:
    """The AP of an accumulated ``COCOeval`` over every area, at its last detection cap.

    ``COCOeval.summarize`` reads its AP at 100 detections an image whatever the caps are set
    to (COCO's images hold a few objects); a scene of thousands needs the cap it was given.

    Args:
        evaluation (COCOeval): Evaluated and accumulated.
        iou_index (int, optional): One IoU threshold of ``params.iouThrs`` (0: IoU 0.5); None
            averages them all (0.5:0.95).

    Returns:
        float: The mean precision over recall points, classes (and thresholds), -1 where
        nothing was counted.
    """
    # (IoU thresholds, recall points, classes, area ranges, caps); area range 0 is 'all'.
    precision = evaluation.eval['precision'][:, :, :, 0, -1]
    if iou_index is not None:
        precision = precision[iou_index]
    counted = precision[precision > -1]
    return float(counted.mean()) if counted.size else -1.0


def coco_map(gt_boxes: np.ndarray, gt_labels: np.ndarray, gt_masks: Optional[List[dict]],
             boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, masks: Optional[List[dict]],
             image_shape: Tuple[int, int], num_classes: int) -> Dict[str, float]:
    """COCO AP over IoU 0.5:0.95 and at 0.5, of boxes and (where both sides have them) masks.

    Args:
        gt_boxes (np.ndarray): (N, 4) x1, y1, x2, y2.
        gt_labels (np.ndarray): (N,) class indices.
        gt_masks (list[dict], optional): N COCO RLEs (:func:`polygon_rle`).
        boxes (np.ndarray): (M, 4) detected boxes x1, y1, x2, y2.
        scores (np.ndarray): (M,) their scores.
        labels (np.ndarray): (M,) their class indices.
        masks (list[dict], optional): M COCO RLEs of the detections.
        image_shape (tuple[int, int]): (H, W).
        num_classes (int): Classes of the labels.

    Returns:
        dict[str, float]: ``bbox_mAP``, ``bbox_mAP_50`` and, with masks on both sides,
        ``segm_mAP``, ``segm_mAP_50`` (0 to 1; -1 where COCOeval has nothing to count).
    """
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    def xywh(box: Sequence[float]) -> List[float]:
        return [float(box[0]), float(box[1]), float(box[2] - box[0]), float(box[3] - box[1])]

    height, width = image_shape
    annotations = []
    for index, (box, label) in enumerate(zip(gt_boxes, gt_labels)):
        annotation = dict(
            id=index + 1,
            image_id=1,
            category_id=int(label) + 1,
            bbox=xywh(box),
            area=float((box[2] - box[0]) * (box[3] - box[1])),
            iscrowd=0)
        if gt_masks is not None:
            annotation['segmentation'] = gt_masks[index]
        annotations.append(annotation)
    ground_truth = COCO()
    ground_truth.dataset = dict(
        images=[dict(id=1, height=height, width=width)],
        annotations=annotations,
        categories=[dict(id=c + 1, name=str(c)) for c in range(num_classes)])
    results = {}
    kinds = ['bbox'] + (['segm'] if gt_masks is not None and masks is not None else [])
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints as it goes
        ground_truth.createIndex()
        for kind in kinds:
            if kind == 'bbox':
                regions = [dict(bbox=xywh(box)) for box in boxes]
            else:
                regions = [dict(segmentation=mask) for mask in masks]
            detections = [
                dict(image_id=1, category_id=int(label) + 1, score=float(score), **region)
                for region, score, label in zip(regions, scores, labels)
            ]
            if not detections:
                results.update({f'{kind}_mAP': 0.0, f'{kind}_mAP_50': 0.0})
                continue
            evaluation = COCOeval(ground_truth, ground_truth.loadRes(detections), kind)
            evaluation.params.maxDets = [MAX_DETECTIONS]
            evaluation.evaluate()
            evaluation.accumulate()
            results.update({
                f'{kind}_mAP': summary_precision(evaluation),
                f'{kind}_mAP_50': summary_precision(evaluation, iou_index=0)
            })
    return results
