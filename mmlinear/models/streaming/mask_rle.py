"""Instance masks pasted into their box as mmdet pastes them, and written as COCO RLE in
whole-image coordinates (never a whole-image binary mask) or as mmdet's (N, H, W) bool maps."""
from typing import Dict, Iterable, Iterator, List, Tuple

import numpy as np
import torch
from torch import Tensor


def region_to_rle(region: np.ndarray, top: int, left: int,
                  image_shape: Tuple[int, int]) -> Dict[str, object]:
    """The COCO RLE of a whole-image mask that is ``region`` at (``top``, ``left``) and zero
    elsewhere, counted from the region alone.

    COCO RLE runs down the columns of the whole image; the region's columns are padded with
    the zero rows above and below it (one column strip, never the whole image), and the zero
    columns before and after it lengthen the first and last runs.

    Args:
        region (np.ndarray): (h, w) bool mask.
        top (int): Its first image row.
        left (int): Its first image column.
        image_shape (tuple[int, int]): (H, W) of the image.

    Returns:
        dict: ``{'size': [H, W], 'counts': str}`` as ``pycocotools.mask.encode`` gives it
        (counts decoded to text, ready for JSON).
    """
    from pycocotools import mask as mask_util
    height, width = image_shape
    if not region.size:  # a box on the image's border: no pixel of the image
        region, top, left = np.zeros((0, 0), dtype=bool), 0, 0
    rows, columns = region.shape
    if top < 0 or left < 0 or top + rows > height or left + columns > width:
        raise ValueError(f'a region of {rows} x {columns} at ({top}, {left}) leaves the '
                         f'{height} x {width} image')
    strip = np.zeros((height, columns), dtype=bool)
    strip[top:top + rows] = region
    flat = strip.T.reshape(-1)
    changes = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    counts = np.diff(np.concatenate(([0], changes, [flat.size]))).tolist() if flat.size else [0]
    if flat.size and flat[0]:
        counts.insert(0, 0)  # RLE starts with a run of zeros
    counts[0] += left * height
    after = (width - left - columns) * height
    if flat.size and flat[-1]:
        if after:  # pycocotools writes no empty run at the end
            counts.append(after)
    else:
        counts[-1] += after
    rle = mask_util.frPyObjects({'counts': counts, 'size': [height, width]}, height, width)
    rle['counts'] = rle['counts'].decode('ascii')
    return rle


def rle_counts(counts: str) -> List[int]:
    """The run lengths of a COCO RLE's compressed ``counts`` (pycocotools' text format: each
    run in 5-bit groups with a continuation bit, from the third on as the difference to the
    run two before).

    Args:
        counts (str): The compressed counts.

    Returns:
        list[int]: The runs, zeros first.
    """
    runs: List[int] = []
    data = counts.encode('ascii')
    position = 0
    while position < len(data):
        value, shift, more = 0, 0, True
        while more:
            group = data[position] - 48
            value |= (group & 0x1f) << shift
            more = bool(group & 0x20)
            position += 1
            shift += 5
            if not more and group & 0x10:  # negative: extend the sign
                value |= -1 << shift
        if len(runs) > 2:
            value += runs[-2]
        runs.append(value)
    return runs


def rle_to_region(rle: Dict[str, object]) -> Tuple[np.ndarray, int, int]:
    """The smallest region holding every pixel of a COCO RLE mask, decoded from the runs
    alone (the inverse of :func:`region_to_rle`, never the whole image).

    Args:
        rle (dict): ``{'size': [H, W], 'counts': str or bytes}``.

    Returns:
        tuple[np.ndarray, int, int]: The (h, w) bool region, its first row and first column
        ((0, 0) of an empty (0, 0) region for an empty mask).
    """
    height = rle['size'][0]
    counts = rle['counts']
    runs = rle_counts(counts.decode('ascii') if isinstance(counts, bytes) else counts)
    starts = np.cumsum([0] + runs[:-1])
    segments = []  # (column, first row, stop row) of every run of ones within a column
    for start, length in zip(starts[1::2].tolist(), runs[1::2]):
        while length > 0:
            column, row = divmod(start, height)
            taken = min(length, height - row)
            segments.append((column, row, row + taken))
            start, length = start + taken, length - taken
    if not segments:
        return np.zeros((0, 0), dtype=bool), 0, 0
    columns, firsts, stops = (np.array(values) for values in zip(*segments))
    top, left = int(firsts.min()), int(columns.min())
    region = np.zeros((int(stops.max()) - top, int(columns.max()) - left + 1), dtype=bool)
    for column, first, stop in segments:
        region[first - top:stop - top, column - left] = True
    return region, top, left


def pasted_masks(mask_head: torch.nn.Module, mask_preds: Tensor, bboxes: Tensor, labels: Tensor,
                 image_shape: Tuple[int,
                                    int], threshold: float) -> Iterator[Tuple[Tensor, int, int]]:
    """The binary masks mmdet's ``FCNMaskHead.predict_by_feat`` pastes into the image, box by
    box, each as the region of its box.

    Each mask is pasted into its box alone with mmdet's ``_do_paste_mask`` (``skip_empty``:
    the box's pixels and one beyond, as mmdet pastes on the CPU; every pixel's value depends
    on its own coordinates only, so pasting one box at a time gives mmdet's pixels) and
    thresholded at ``mask_thr_binary`` as mmdet does.

    Args:
        mask_head (nn.Module): The mmdet ``FCNMaskHead`` (``class_agnostic``).
        mask_preds (Tensor): (N, num_classes or 1, h, w) mask logits.
        bboxes (Tensor): (N, 4) boxes in image pixels.
        labels (Tensor): (N,) labels.
        image_shape (tuple[int, int]): (H, W).
        threshold (float): ``mask_thr_binary`` (>= 0).

    Yields:
        tuple[Tensor, int, int]: Each mask's (h, w) bool region on the boxes' device, its
        first image row and first image column.
    """
    from mmdet.models.roi_heads.mask_heads.fcn_mask_head import _do_paste_mask
    probabilities = mask_preds.sigmoid()
    if not mask_head.class_agnostic:
        probabilities = probabilities[torch.arange(len(labels), device=labels.device), labels][:,
                                                                                               None]
    height, width = image_shape
    for index in range(len(bboxes)):
        pasted, (rows, columns) = _do_paste_mask(
            probabilities[index:index + 1], bboxes[index:index + 1], height, width, skip_empty=True)
        yield pasted[0] >= threshold, int(rows.start), int(columns.start)


def masks_to_rle(regions: Iterable[Tuple[Tensor, int, int]],
                 image_shape: Tuple[int, int]) -> List[Dict[str, object]]:
    """Masks given as regions (:func:`pasted_masks`) as COCO RLE, encoded from the regions by
    :func:`region_to_rle` (never a whole-image array).

    Args:
        regions (Iterable[tuple[Tensor, int, int]]): Each mask's (h, w) bool region, its first
            image row and first image column.
        image_shape (tuple[int, int]): (H, W).

    Returns:
        list[dict]: One COCO RLE per region, in whole-image coordinates.
    """
    return [
        region_to_rle(region.cpu().numpy(), top, left, image_shape) for region, top, left in regions
    ]


def masks_to_bitmaps(regions: Iterable[Tuple[Tensor, int, int]], num_masks: int,
                     image_shape: Tuple[int, int], device: torch.device) -> Tensor:
    """Masks given as regions (:func:`pasted_masks`) as mmdet's ``FCNMaskHead.predict_by_feat``
    returns them: whole-image bool maps, each region written into its own.

    Args:
        regions (Iterable[tuple[Tensor, int, int]]): Each mask's (h, w) bool region, its first
            image row and first image column.
        num_masks (int): N, the number of regions.
        image_shape (tuple[int, int]): (H, W).
        device (torch.device): Where the maps are made.

    Returns:
        Tensor: (N, H, W) bool.
    """
    masks = torch.zeros((num_masks, ) + tuple(image_shape), dtype=torch.bool, device=device)
    for index, (region, top, left) in enumerate(regions):
        masks[index, top:top + region.shape[0], left:left + region.shape[1]] = region
    return masks
