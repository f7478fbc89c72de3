"""Scenes of the demo shapes: dark noisy backgrounds with bright, upright, non-overlapping
circles, squares and triangles (:mod:`mmlinear.utils.shape_geometry`).

``tools/misc/make_tiny_datasets.py`` draws the bundled detection, segmentation and depth sets'
scenes with :func:`demo_scene`, and :func:`mmlinear.cli.benchmark.shape_scene.shape_scene` the
large detection scene from the same pieces, so that the large scene's shapes are the ones the
demo detector learnt.

Every function takes either kind of NumPy random stream: the bundled data is drawn from
``np.random.RandomState`` streams (so that its bytes stay those of every earlier release), the
large scene from a ``np.random.Generator``; both draw integers alike
(``RandomState.randint``, ``Generator.integers``).
"""
import math
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from PIL import Image, ImageDraw

from .shape_geometry import SHAPE_CLASSES, UPRIGHT, shape_polygon

#: The random streams the scenes are drawn from.
RandomStream = Union[np.random.Generator, np.random.RandomState]
#: The shapes' colours are uniform in [120, 255] per channel, the backgrounds' in [0, 89].
BRIGHT_LOW, BACKGROUND_HIGH = 120, 90
#: The least gap in pixels between the circumcircles of two shapes of a scene.
SHAPE_GAP = 2


def random_integers(rng: RandomStream,
                    low: int,
                    high: Optional[int] = None,
                    size: Union[None, int, Tuple[int, ...]] = None) -> Union[int, np.ndarray]:
    """Integers uniform in [low, high) ([0, low) without ``high``) from either stream.

    Args:
        rng (np.random.Generator | np.random.RandomState): The stream.
        low (int): The lowest value (the exclusive upper bound without ``high``).
        high (int, optional): The exclusive upper bound.
        size (int | tuple[int], optional): The output's shape; one integer without it.

    Returns:
        int | np.ndarray: The draw(s), int64.
    """
    if isinstance(rng, np.random.Generator):
        return rng.integers(low, high, size)
    return rng.randint(low, high, size)


def noisy_background(rng: RandomStream,
                     size: int,
                     noise: int = 12,
                     cell: Optional[int] = None) -> Image.Image:
    """A random dark colour (one per ``cell`` x ``cell`` block, or one for the whole image)
    with pixel noise uniform in +-``noise``, so that images are not trivially clean.

    Args:
        rng (np.random.Generator | np.random.RandomState): The stream.
        size (int): Image side in pixels.
        noise (int): Pixel noise, +- grey levels. Defaults to 12.
        cell (int, optional): Side of the blocks of one colour; None: one colour.

    Returns:
        Image.Image: The (size, size) RGB image.
    """
    if cell is None:
        base = random_integers(rng, 0, BACKGROUND_HIGH, 3)
    else:
        blocks = -(-size // cell)
        base = np.repeat(
            np.repeat(random_integers(rng, 0, BACKGROUND_HIGH, (blocks, blocks, 3)), cell, 0), cell,
            1)[:size, :size]
    pixel_noise = random_integers(rng, -noise, noise + 1, (size, size, 3))
    return Image.fromarray(np.clip(base + pixel_noise, 0, 255).astype(np.uint8))


def bright_colour(rng: RandomStream) -> Tuple[int, int, int]:
    """A random RGB colour clearly brighter than every background.

    Args:
        rng (np.random.Generator | np.random.RandomState): The stream.

    Returns:
        tuple[int, int, int]: Each channel in [120, 255].
    """
    return tuple(int(c) for c in random_integers(rng, BRIGHT_LOW, 256, 3))


def overlaps(cx: float, cy: float, radius: float, placed: Sequence[Tuple[float, float,
                                                                         float]]) -> bool:
    """Whether a shape's circumcircle comes within :data:`SHAPE_GAP` pixels of a placed one's.

    Args:
        cx, cy (float): The new shape's centre in pixels.
        radius (float): Its circumradius in pixels.
        placed (Sequence[tuple[float, float, float]]): (cx, cy, radius) of the placed shapes.

    Returns:
        bool: True if it is too close to any of them.
    """
    return any(math.hypot(cx - x, cy - y) <= radius + r + SHAPE_GAP for x, y, r in placed)


def draw_random_shape(draw: ImageDraw.ImageDraw, rng: RandomStream, cx: float, cy: float,
                      radius: float) -> Tuple[int, List[Tuple[float, float]]]:
    """Draw an upright shape of a random class in a random bright colour (drawn in that order).

    Args:
        draw (ImageDraw.ImageDraw): The image's drawing context.
        rng (np.random.Generator | np.random.RandomState): The stream.
        cx, cy (float): Centre in pixels.
        radius (float): Circumradius in pixels.

    Returns:
        tuple[int, list[tuple[float, float]]]: The class index into :data:`SHAPE_CLASSES` and
        the polygon's vertices.
    """
    label = int(random_integers(rng, len(SHAPE_CLASSES)))
    kind = SHAPE_CLASSES[label]
    polygon = shape_polygon(kind, cx, cy, radius, UPRIGHT[kind])
    draw.polygon(polygon, fill=bright_colour(rng))
    return label, polygon


def demo_scene(rng: RandomStream, size: int) -> Tuple[Image.Image, np.ndarray, List[Dict]]:
    """A scene of the bundled detection, segmentation and depth sets: one to three upright
    shapes of circumradius 12-30 px that do not overlap (a shape that finds no free place in
    20 tries is left out).

    Args:
        rng (np.random.Generator | np.random.RandomState): The stream.
        size (int): Image side in pixels.

    Returns:
        tuple[Image.Image, np.ndarray, list[dict]]: The RGB image, its (size, size) uint8
        label map (0 background, 1 + the class index of the shape) and the shapes, each a
        dict with its ``category`` (class index) and ``polygon`` (vertices).
    """
    img = noisy_background(rng, size)
    label_map = Image.new('L', (size, size), 0)
    draw, label_draw = ImageDraw.Draw(img), ImageDraw.Draw(label_map)
    placed: List[Tuple[float, float, float]] = []
    instances = []
    for _ in range(random_integers(rng, 1, 4)):
        for _attempt in range(20):
            radius = rng.uniform(12, 30)
            cx, cy = rng.uniform(radius, size - radius, size=2)
            if not overlaps(cx, cy, radius, placed):
                break
        else:
            continue
        placed.append((cx, cy, radius))
        # Upright, as in the classification set: the detection and segmentation demos start
        # from the classifier's backbone, so their shapes are the ones it learnt.
        category, polygon = draw_random_shape(draw, rng, cx, cy, radius)
        label_draw.polygon(polygon, fill=category + 1)
        instances.append(dict(category=category, polygon=polygon))
    return img, np.array(label_map), instances
