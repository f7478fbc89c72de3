"""mIoU of a class map of any size against its label map, a block of rows at a time, as mmseg's
``IoUMetric`` computes it for one image."""
from typing import Any, Dict

import numpy as np
import torch
from mmseg.evaluation.metrics import IoUMetric

#: Rows compared at a time: the areas are counted per block, so a huge map is never a tensor.
IOU_BLOCK_ROWS = 1024


def _rows(source: Any, start: int, stop: int) -> torch.Tensor:
    """Rows [start, stop) of an (H, W) or (H, W, 1) map as an int64 (rows, W) tensor."""
    block = np.asarray(source[start:stop])
    if block.ndim == 3:
        block = block[..., 0]
    return torch.from_numpy(block.astype(np.int64))


def class_map_iou(prediction: Any,
                  label: Any,
                  num_classes: int,
                  ignore_index: int = 255) -> Dict[str, Any]:
    """IoU of every class, mIoU and aAcc of ``prediction`` against ``label``.

    The areas (intersection, union, predicted and labelled pixels of each class) are counted
    with mmseg's ``IoUMetric.intersect_and_union`` a block of ``IOU_BLOCK_ROWS`` rows at a
    time and summed, and turned into the metrics by ``IoUMetric.total_area_to_metrics``, so
    the figures are those mmseg's test loop gives for the image.

    Args:
        prediction (array-like): (H, W) classes (or (H, W, 1), e.g. a one-band
            :class:`~mmlinear.apis.rasters.RasterImage`), sliced by rows.
        label (array-like): The (H, W) or (H, W, 1) label map, sliced by rows.
        num_classes (int): Number of classes.
        ignore_index (int): The label of pixels left out. Defaults to 255.

    Returns:
        dict: ``IoU`` (list of num_classes floats, percent; NaN for a class in neither map),
        ``mIoU`` (their mean over the classes that are not NaN, percent) and ``aAcc``
        (percent of the labelled pixels predicted right).

    Raises:
        ValueError: The two maps differ in height or width.
    """
    height, width = prediction.shape[:2]
    if tuple(label.shape[:2]) != (height, width):
        raise ValueError(f'the class map is {height} x {width}, the label map '
                         f'{label.shape[0]} x {label.shape[1]}: they must be the same size')
    areas = torch.zeros((4, num_classes), dtype=torch.float64)
    for start in range(0, height, IOU_BLOCK_ROWS):
        stop = min(start + IOU_BLOCK_ROWS, height)
        counted = IoUMetric.intersect_and_union(
            _rows(prediction, start, stop), _rows(label, start, stop), num_classes, ignore_index)
        areas += torch.stack([area.double() for area in counted])
    intersect, union, predicted, labelled = areas
    metrics = IoUMetric.total_area_to_metrics(intersect, union, predicted, labelled, ['mIoU'])
    iou = np.asarray(metrics['IoU'], np.float64) * 100
    return dict(
        IoU=iou.tolist(),
        mIoU=float(np.nanmean(iou)),
        aAcc=float(np.asarray(metrics['aAcc']) * 100))
