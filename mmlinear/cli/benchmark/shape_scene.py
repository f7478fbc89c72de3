"""A large generated scene of many shapes, with its ground truth, for comparing whole-image
detection with detection on slices."""
from typing import Dict, List, NamedTuple, Tuple

import numpy as np

from mmlinear.utils.shape_geometry import SHAPE_CLASSES
from mmlinear.utils.shape_scenes import draw_random_shape, noisy_background, overlaps


class ShapeScene(NamedTuple):
    """A scene and its ground truth.

    Attributes:
        image (np.ndarray): (H, W, 3) uint8 RGB.
        boxes (np.ndarray): (N, 4) float64 boxes x1, y1, x2, y2 of the shapes.
        labels (np.ndarray): (N,) int64 indices into :data:`SHAPE_CLASSES`.
    """
    image: np.ndarray
    boxes: np.ndarray
    labels: np.ndarray


def shape_scene(size: int,
                seed: int = 0,
                radius_range: Tuple[float, float] = (12, 30),
                shapes_per_cell: float = 2.0,
                cell: int = 128) -> ShapeScene:
    """A ``size`` x ``size`` scene drawn as the demo detector's training scenes are drawn
    (:mod:`mmlinear.utils.shape_scenes`), at their scale: upright circles, squares and
    triangles of circumradius ``radius_range`` in bright colours (120-255 per channel) on a
    dark noisy background (a random colour of 0-89 per ``cell`` x ``cell`` block, +-12 of
    pixel noise), never overlapping, placed anywhere (so that many cross the borders of any
    grid of tiles), about ``shapes_per_cell`` per block as in the 128 x 128 training scenes
    (1-3 each).

    Args:
        size (int): Side in pixels.
        seed (int): Random seed. Defaults to 0.
        radius_range (tuple[float, float]): Circumradii in pixels. Defaults to (12, 30).
        shapes_per_cell (float): Shapes per ``cell`` x ``cell`` block on average.
        cell (int): The block of one background colour. Defaults to 128.

    Returns:
        ShapeScene: The image and its boxes and labels.
    """
    from PIL import ImageDraw
    rng = np.random.default_rng(seed)
    canvas = noisy_background(rng, size, cell=cell)
    draw = ImageDraw.Draw(canvas)
    wanted = int(round(shapes_per_cell * size * size / cell**2))
    grid: Dict[Tuple[int, int], List[Tuple[float, float, float]]] = {}
    spacing = 2 * radius_range[1] + 2  # a grid of this pitch finds every possible overlap
    boxes, labels = [], []
    for _ in range(wanted * 20):  # tries; a crowded scene takes fewer than asked
        if len(boxes) == wanted:
            break
        radius = rng.uniform(*radius_range)
        cx, cy = rng.uniform(radius, size - radius, 2)
        key = (int(cx // spacing), int(cy // spacing))
        near = [
            placed for dx in (-1, 0, 1) for dy in (-1, 0, 1)
            for placed in grid.get((key[0] + dx, key[1] + dy), [])
        ]
        if overlaps(cx, cy, radius, near):
            continue
        grid.setdefault(key, []).append((cx, cy, radius))
        label, polygon = draw_random_shape(draw, rng, cx, cy, radius)
        points = np.array(polygon)
        boxes.append([*points.min(0).clip(0, size), *points.max(0).clip(0, size)])
        labels.append(label)
    return ShapeScene(
        np.asarray(canvas),
        np.array(boxes, dtype=np.float64).reshape(-1, 4), np.array(labels, dtype=np.int64))


__all__ = ['SHAPE_CLASSES', 'ShapeScene', 'shape_scene']
