"""The shapes of the generated demo data: their classes, the rotation that stands each upright,
and their polygons.

``tools/misc/make_tiny_datasets.py`` draws the bundled datasets with them and
:mod:`mmlinear.cli.benchmark.shape_scene` the large detection scene (both through
:mod:`mmlinear.utils.shape_scenes`), so that the scene's shapes are the ones the demo
detector learnt.
"""
import math
from typing import List, Tuple

#: The demo classes, in label order.
SHAPE_CLASSES = ('circle', 'square', 'triangle')
#: Rotation that stands a shape upright: squares axis-aligned, triangles pointing up.
UPRIGHT = {'circle': 0., 'square': math.pi / 4, 'triangle': -math.pi / 2}
#: Vertices per shape (a circle is drawn as a 32-gon).
SIDES = {'circle': 32, 'square': 4, 'triangle': 3}


def shape_polygon(kind: str, cx: float, cy: float, radius: float,
                  angle: float) -> List[Tuple[float, float]]:
    """Vertices of a shape centred at (cx, cy) with circumradius ``radius``.

    Args:
        kind (str): One of :data:`SHAPE_CLASSES`.
        cx, cy (float): Centre in pixels.
        radius (float): Circumradius in pixels.
        angle (float): Rotation in radians (:data:`UPRIGHT` stands the shape upright).

    Returns:
        list[tuple[float, float]]: Polygon vertices, also used as the COCO segmentation.
    """
    if kind not in SIDES:
        raise ValueError(f'unknown shape {kind!r}; allowed: {SHAPE_CLASSES}')
    sides = SIDES[kind]
    return [(cx + radius * math.cos(angle + 2 * math.pi * i / sides),
             cy + radius * math.sin(angle + 2 * math.pi * i / sides)) for i in range(sides)]
