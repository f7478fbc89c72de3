"""RoI features read from the rows of the pyramid that each group of RoIs covers, instead of
from whole levels."""
import math
from typing import Callable, List, Sequence, Tuple

import torch
from torch import Tensor, nn

from .band_resize import Span

Shape = Tuple[int, int]


def roi_row_spans(rois: Tensor, spatial_scale: float, aligned: bool,
                  height: int) -> Tuple[Tensor, Tensor]:
    """The rows of a level that mmcv's ``RoIAlign`` reads for each RoI, with the margin that
    keeps its border handling that of the whole level.

    ``RoIAlign`` samples rows y in [y1 * scale - offset, y1 * scale - offset + h] with
    ``h = max(y2 * scale - y1 * scale, 1)`` when not ``aligned``, and interpolates between
    floor(y) and floor(y) + 1; it clamps y only at the map's first and last rows. A crop with
    one row above the first sample and two below the last meets no clamp the whole level
    would not, so the crop gives the same features (the RoI's rows shifted by the crop's
    first row, which is exact in floating point for a power-of-two stride).

    Args:
        rois (Tensor): (K, 5) RoIs (batch index, x1, y1, x2, y2) in image pixels.
        spatial_scale (float): The level's scale (1 / stride).
        aligned (bool): ``RoIAlign``'s ``aligned``.
        height (int): Rows of the level.

    Returns:
        tuple[Tensor, Tensor]: (K,) first rows and (K,) stop rows (int64), within [0, height].
    """
    offset = 0.5 if aligned else 0.0
    top = rois[:, 2].double() * spatial_scale - offset
    extent = rois[:, 4].double() * spatial_scale - offset - top
    if not aligned:
        extent = extent.clamp(min=1.0)
    first = (top.floor() - 1).clamp(0, height).long()
    stop = ((top + extent).ceil() + 2).clamp(0, height).long()
    return first, torch.maximum(stop, first + 1).clamp(max=height)


def group_rows(first: Tensor, stop: Tensor, head_rows: int) -> List[Tuple[Tensor, Span]]:
    """Group RoIs, sorted by their first row, into spans of at most ``head_rows`` rows (or one
    RoI's own rows where it is taller).

    Returns:
        list[tuple[Tensor, Span]]: The RoIs' positions in ``first`` and the rows they read.
    """
    groups: List[Tuple[Tensor, Span]] = []
    order = first.argsort().tolist()
    firsts, stops = first.tolist(), stop.tolist()
    members: List[int] = []
    start = end = 0
    for index in order:
        allowed = max(head_rows, stops[index] - firsts[index])
        if members and max(end, stops[index]) - start > allowed:
            groups.append((torch.tensor(members, dtype=torch.long), (start, end)))
            members = []
        if not members:
            start, end = firsts[index], stops[index]
        members.append(index)
        end = max(end, stops[index])
    if members:
        groups.append((torch.tensor(members, dtype=torch.long), (start, end)))
    return groups


def extract_roi_bands(extractor: nn.Module, read_level: Callable[[int, Span], Tensor],
                      level_shapes: Sequence[Shape], rois: Tensor, head_rows: int) -> Tensor:
    """What mmdet's ``SingleRoIExtractor(feats, rois)`` returns, reading each level only in
    the row spans its RoIs cover.

    The RoIs go to levels by the extractor's own ``map_roi_levels``; on each level they are
    grouped into spans of at most ``head_rows`` rows (:func:`group_rows`), and the level's
    ``RoIAlign`` runs on each span with the RoIs shifted to it (:func:`roi_row_spans`).

    Args:
        extractor (nn.Module): An mmdet ``SingleRoIExtractor`` with mmcv ``RoIAlign`` layers.
        read_level (Callable[[int, Span], Tensor]): Returns rows ``span`` of a level as a
            contiguous (1, C, rows, W_level) tensor.
        level_shapes (Sequence[tuple[int, int]]): (H, W) of the levels.
        rois (Tensor): (K, 5) RoIs of one image (batch index 0).
        head_rows (int): Rows of a level read at once (at least one RoI's own rows).

    Returns:
        Tensor: (K, out_channels, *output_size) features.
    """
    num_levels = extractor.num_inputs
    layers = extractor.roi_layers
    features = rois.new_zeros(len(rois), extractor.out_channels, *layers[0].output_size)
    if not len(rois):
        return features
    targets = extractor.map_roi_levels(rois, num_levels) if num_levels > 1 else \
        torch.zeros(len(rois), dtype=torch.long, device=rois.device)
    for level in range(num_levels):
        indices = (targets == level).nonzero(as_tuple=False).squeeze(1)
        if not indices.numel():
            continue
        layer = layers[level]
        level_rois = rois[indices]
        first, stop = roi_row_spans(level_rois, layer.spatial_scale, layer.aligned,
                                    level_shapes[level][0])
        stride = 1 / layer.spatial_scale
        if stride != 2**round(math.log2(stride)):
            raise ValueError(f'RoI bands need power-of-two strides, got {stride:g}')
        for members, span in group_rows(first, stop, head_rows):
            shifted = level_rois[members].clone()
            shifted[:, [2, 4]] -= span[0] * stride
            features[indices[members]] = layer(read_level(level, span), shifted)
    return features
