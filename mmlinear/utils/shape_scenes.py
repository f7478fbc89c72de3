"""Scenes of the demo shapes: dark noisy backgrounds with bright, upright, non-overlapping
circles, squares and triangles (:mod:`mmlinear.utils.shape_geometry`).

``tools/misc/make_tiny_datasets.py`` draws the bundled detection, segmentation and depth sets'
scenes with :func:`demo_scene`, and :func:`mmlinear.cli.benchmark.shape_scene.shape_scene` the
large detection scene and :mod:`mmlinear.utils.large_shape_scenes` the large segmentation
scenes from the same pieces (:func:`scatter_shapes`), so that the large scenes' shapes are the
ones the demo models learnt.

Every function takes either kind of NumPy random stream: the bundled data is drawn from
``np.random.RandomState`` streams (so that its bytes stay those of every earlier release), the
large scene from a ``np.random.Generator``; both draw integers alike
(``RandomState.randint``, ``Generator.integers``).
"""
import math
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

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
    return Image.fromarray(with_pixel_noise(rng, base, (size, size), noise))


def with_pixel_noise(rng: RandomStream, base: np.ndarray, shape: Tuple[int, int],
                     noise: int) -> np.ndarray:
    """A background colour with pixel noise uniform in +-``noise``, clipped to 8 bits.

    Args:
        rng (np.random.Generator | np.random.RandomState): The stream.
        base (np.ndarray): The colours, (3,) or (h, w, 3) integers in [0, 255].
        shape (tuple[int, int]): (h, w), the image's pixels.
        noise (int): Pixel noise, +- grey levels.

    Returns:
        np.ndarray: (h, w, 3) uint8.
    """
    pixel_noise = random_integers(rng, -noise, noise + 1, (*shape, 3))
    return np.clip(base + pixel_noise, 0, 255).astype(np.uint8)


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


class Shape(NamedTuple):
    """One shape of a scene.

    Attributes:
        category (int): Its class, an index into :data:`SHAPE_CLASSES`.
        polygon (list[tuple[float, float]]): Its vertices (x, y) in pixels.
        colour (tuple[int, int, int]): Its RGB fill.
        centre (tuple[float, float]): (cx, cy) of its circumcircle in pixels.
        radius (float): Its circumradius in pixels.
    """
    category: int
    polygon: List[Tuple[float, float]]
    colour: Tuple[int, int, int]
    centre: Tuple[float, float]
    radius: float


def random_shape(rng: RandomStream, cx: float, cy: float, radius: float) -> Shape:
    """An upright shape of a random class in a random bright colour (drawn in that order).

    Args:
        rng (np.random.Generator | np.random.RandomState): The stream.
        cx, cy (float): Centre in pixels.
        radius (float): Circumradius in pixels.

    Returns:
        Shape: The shape.
    """
    category = int(random_integers(rng, len(SHAPE_CLASSES)))
    kind = SHAPE_CLASSES[category]
    polygon = shape_polygon(kind, cx, cy, radius, UPRIGHT[kind])
    return Shape(category, polygon, bright_colour(rng), (cx, cy), radius)


def draw_random_shape(draw: ImageDraw.ImageDraw, rng: RandomStream, cx: float, cy: float,
                      radius: float) -> Tuple[int, List[Tuple[float, float]]]:
    """Draw an upright shape of a random class in a random bright colour (:func:`random_shape`).

    Args:
        draw (ImageDraw.ImageDraw): The image's drawing context.
        rng (np.random.Generator | np.random.RandomState): The stream.
        cx, cy (float): Centre in pixels.
        radius (float): Circumradius in pixels.

    Returns:
        tuple[int, list[tuple[float, float]]]: The class index into :data:`SHAPE_CLASSES` and
        the polygon's vertices.
    """
    shape = random_shape(rng, cx, cy, radius)
    draw.polygon(shape.polygon, fill=shape.colour)
    return shape.category, shape.polygon


def scatter_shapes(rng: RandomStream,
                   size: int,
                   radius_range: Tuple[float, float] = (12, 30),
                   shapes_per_cell: float = 2.0,
                   cell: int = 128) -> List[Shape]:
    """Shapes placed anywhere on a ``size`` x ``size`` image, never overlapping, about
    ``shapes_per_cell`` per ``cell`` x ``cell`` block as in the 128 x 128 demo scenes (1-3
    each), so that many cross the borders of any grid of tiles.

    Each try draws a radius, then a centre; a shape that comes too close to a placed one
    (:func:`overlaps`) is dropped, else its class and colour are drawn (:func:`random_shape`).
    A crowded image takes fewer shapes than asked (``20`` tries per shape wanted).

    Args:
        rng (np.random.Generator | np.random.RandomState): The stream.
        size (int): Image side in pixels.
        radius_range (tuple[float, float]): Circumradii in pixels. Defaults to (12, 30).
        shapes_per_cell (float): Shapes per ``cell`` x ``cell`` block on average.
            Defaults to 2.
        cell (int): The block the density is counted in. Defaults to 128.

    Returns:
        list[Shape]: The shapes in the order they were placed.
    """
    wanted = int(round(shapes_per_cell * size * size / cell**2))
    grid: Dict[Tuple[int, int], List[Tuple[float, float, float]]] = {}
    spacing = 2 * radius_range[1] + 2  # a grid of this pitch finds every possible overlap
    shapes: List[Shape] = []
    for _ in range(wanted * 20):
        if len(shapes) == wanted:
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
        shapes.append(random_shape(rng, cx, cy, radius))
    return shapes


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
