"""A large generated scene of many shapes, with its ground truth, for comparing whole-image
detection with detection on slices."""
from typing import List, NamedTuple, Tuple

import numpy as np

from mmlinear.utils.shape_geometry import SHAPE_CLASSES
from mmlinear.utils.shape_scenes import noisy_background, scatter_shapes


class ShapeScene(NamedTuple):
    """A scene and its ground truth.

    Attributes:
        image (np.ndarray): (H, W, 3) uint8 RGB.
        boxes (np.ndarray): (N, 4) float64 boxes x1, y1, x2, y2 of the shapes.
        labels (np.ndarray): (N,) int64 indices into :data:`SHAPE_CLASSES`.
        polygons (list[list[tuple[float, float]]]): The N polygons drawn (vertices x, y).
    """
    image: np.ndarray
    boxes: np.ndarray
    labels: np.ndarray
    polygons: List[List[Tuple[float, float]]]


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
        ShapeScene: The image and its boxes, labels and polygons.
    """
    from PIL import ImageDraw
    rng = np.random.default_rng(seed)
    canvas = noisy_background(rng, size, cell=cell)
    draw = ImageDraw.Draw(canvas)
    shapes = scatter_shapes(rng, size, radius_range, shapes_per_cell, cell)
    boxes = []
    for shape in shapes:
        draw.polygon(shape.polygon, fill=shape.colour)
        points = np.array(shape.polygon)
        boxes.append([*points.min(0).clip(0, size), *points.max(0).clip(0, size)])
    return ShapeScene(
        np.asarray(canvas),
        np.array(boxes, dtype=np.float64).reshape(-1, 4),
        np.array([shape.category for shape in shapes], dtype=np.int64),
        [list(shape.polygon) for shape in shapes])


__all__ = ['SHAPE_CLASSES', 'ShapeScene', 'shape_scene']
