"""Recall and precision of detections against ground-truth boxes, overall and for the objects
that no tile of a slicing grid holds whole."""
from typing import Dict, List, Sequence, Tuple

import numpy as np


def box_iou(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """(N, M) IoU of (N, 4) and (M, 4) boxes x1, y1, x2, y2."""
    top_left = np.maximum(first[:, None, :2], second[None, :, :2])
    bottom_right = np.minimum(first[:, None, 2:], second[None, :, 2:])
    overlap = np.prod((bottom_right - top_left).clip(0), axis=2)
    area_first = np.prod(first[:, 2:] - first[:, :2], axis=1)
    area_second = np.prod(second[:, 2:] - second[:, :2], axis=1)
    union = area_first[:, None] + area_second[None, :] - overlap
    return np.where(union > 0, overlap / np.maximum(union, 1e-12), 0.0)


def match_detections(gt_boxes: np.ndarray,
                     gt_labels: np.ndarray,
                     boxes: np.ndarray,
                     scores: np.ndarray,
                     labels: np.ndarray,
                     iou_thr: float = 0.5) -> Tuple[np.ndarray, np.ndarray]:
    """One-to-one matches as COCO counts them: detections in order of score, each to the
    unmatched ground-truth box of its class it overlaps most, if by at least ``iou_thr``.

    Returns:
        tuple[np.ndarray, np.ndarray]: (N,) bool, the ground-truth objects found, and (M,)
        bool, the detections that found one.
    """
    found = np.zeros(len(gt_boxes), dtype=bool)
    hits = np.zeros(len(boxes), dtype=bool)
    if not len(gt_boxes) or not len(boxes):
        return found, hits
    ious = box_iou(boxes, gt_boxes)
    ious[labels[:, None] != gt_labels[None, :]] = 0
    for index in np.argsort(-scores, kind='stable'):
        candidates = np.where(found, -1.0, ious[index])
        best = int(candidates.argmax())
        if candidates[best] >= iou_thr:
            found[best] = hits[index] = True
    return found, hits


def slice_grid(height: int, width: int, tile: int, overlap: float) -> List[List[int]]:
    """The slices SAHI cuts an image into: ``tile`` x ``tile`` windows stepping by ``tile``
    minus ``int(overlap * tile)``, the last of each row and column moved back to end at the
    image's border (``sahi.slicing.get_slice_bboxes``).

    Returns:
        list[list[int]]: Slices (x1, y1, x2, y2), row by row.
    """

    def starts(length: int) -> List[int]:
        step, positions, start = tile - int(overlap * tile), [], 0
        while True:
            if start + tile >= length:
                positions.append(max(0, length - tile))
                return positions
            positions.append(start)
            start += step

    return [[x, y, min(x + tile, width), min(y + tile, height)] for y in starts(height)
            for x in starts(width)]


def crossing_tiles(gt_boxes: np.ndarray, tiles: Sequence[Sequence[float]]) -> np.ndarray:
    """(N,) bool: the boxes that no tile (x1, y1, x2, y2) holds whole."""
    tiles = np.asarray(tiles, dtype=np.float64).reshape(-1, 4)
    inside = ((gt_boxes[:, None, 0] >= tiles[None, :, 0]) &
              (gt_boxes[:, None, 1] >= tiles[None, :, 1])
              & (gt_boxes[:, None, 2] <= tiles[None, :, 2]) &
              (gt_boxes[:, None, 3] <= tiles[None, :, 3]))
    return ~inside.any(axis=1)


def recall_report(gt_boxes: np.ndarray,
                  gt_labels: np.ndarray,
                  crossing: np.ndarray,
                  boxes: np.ndarray,
                  scores: np.ndarray,
                  labels: np.ndarray,
                  iou_thr: float = 0.5) -> Dict[str, float]:
    """Recall overall and of the objects crossing tile borders, and precision.

    Returns:
        dict: ``objects``, ``crossing_objects``, ``detections``, ``found``,
        ``found_crossing``, ``recall``, ``recall_crossing`` and ``precision``.
    """
    found, hits = match_detections(gt_boxes, gt_labels, boxes, scores, labels, iou_thr)
    return dict(
        objects=int(len(gt_boxes)),
        crossing_objects=int(crossing.sum()),
        detections=int(len(boxes)),
        found=int(found.sum()),
        found_crossing=int(found[crossing].sum()),
        recall=float(found.mean()) if len(found) else 0.0,
        recall_crossing=float(found[crossing].mean()) if crossing.any() else 0.0,
        precision=float(hits.mean()) if len(hits) else 0.0)
