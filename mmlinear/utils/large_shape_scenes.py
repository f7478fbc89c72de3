"""Large scenes of the demo shapes, made band by band so that no scene is ever whole in memory.

Two kinds, for comparing whole-image segmentation with tiles (``make_tiny_datasets.py
--large-scene SIZE --large-scene-kind KIND``):

- ``'mosaic'``: a grid of independent 128 x 128 scenes of the bundled segmentation set
  (:func:`mmlinear.utils.shape_scenes.demo_scene`); no shape crosses the grid's lines, and
  each scene has its own background colour.
- ``'continuous'``: one image drawn by the same rules (:class:`ContinuousScene`): a dark
  background colour per 128 x 128 block with pixel noise, and upright shapes of the same sizes
  and colours at the same density, placed anywhere, so that many cross the borders of any grid
  of tiles (the detection benchmark's scene, :mod:`mmlinear.cli.benchmark.shape_scene`, is
  drawn alike).

Each is an iterable of :class:`SceneBand`, 128 rows of the image and its label map at a time
(0 background, 1 + the shape's class index).
"""
from typing import Iterator, List, NamedTuple, Tuple

import numpy as np
from PIL import Image, ImageDraw

from .shape_scenes import BACKGROUND_HIGH, Shape, demo_scene, scatter_shapes, with_pixel_noise

#: The kinds of large scene (see the module's docstring).
LARGE_SCENE_KINDS = ('mosaic', 'continuous')
#: The side of a bundled scene, of a background block, and the height of a band.
SCENE_SIZE = 128
#: Pixel noise of the backgrounds, +- grey levels (the bundled scenes').
BACKGROUND_NOISE = 12


class SceneBand(NamedTuple):
    """Rows [top, top + h) of a large scene.

    Attributes:
        top (int): The band's first row.
        image (np.ndarray): (h, W, 3) uint8 RGB.
        labels (np.ndarray): (h, W) uint8 label map.
    """
    top: int
    image: np.ndarray
    labels: np.ndarray


def mosaic_scene_bands(size: int, seed: int = 0) -> Iterator[SceneBand]:
    """The bands of a mosaic of bundled 128 x 128 scenes, row-major, the last row and column
    of scenes cut to ``size``.

    Args:
        size (int): Side of the scene in pixels.
        seed (int): Random seed. Defaults to 0.

    Yields:
        SceneBand: 128 rows at a time (fewer in the last band).
    """
    # seed + 7: the stream the mosaic has been drawn from since it was added, so that a seed
    # keeps giving the same file.
    rng = np.random.RandomState(seed + 7)
    cells = -(-size // SCENE_SIZE)
    for row in range(cells):
        image = np.zeros((SCENE_SIZE, cells * SCENE_SIZE, 3), np.uint8)
        labels = np.zeros((SCENE_SIZE, cells * SCENE_SIZE), np.uint8)
        for col in range(cells):
            scene, label_map, _ = demo_scene(rng, SCENE_SIZE)
            image[:, col * SCENE_SIZE:(col + 1) * SCENE_SIZE] = np.asarray(scene)
            labels[:, col * SCENE_SIZE:(col + 1) * SCENE_SIZE] = label_map
        height = min(SCENE_SIZE, size - row * SCENE_SIZE)
        yield SceneBand(row * SCENE_SIZE, image[:height, :size], labels[:height, :size])


class ContinuousScene:
    """One ``size`` x ``size`` scene whose shapes lie anywhere, made 128 rows at a time.

    The layout (a background colour per 128 x 128 block and every shape,
    :func:`~mmlinear.utils.shape_scenes.scatter_shapes`: a few hundred bytes per block) is
    drawn once from the seed; each band's pixel noise comes from a stream of its own, so a
    band is the same whichever bands were made before it. A shape is drawn into every band
    its circumcircle reaches, with PIL as the bundled scenes are, on a canvas of the band's
    rows and ``margin`` rows above and below, where every such shape lies whole: PIL's
    rasterisation of a polygon moved by whole rows is the same then, whereas a polygon cut
    by the canvas's edge can gain or lose a pixel there. So the bands put together are the
    shapes drawn on the whole image.

    Args:
        size (int): Side in pixels, at least ``2 * radius_range[1]``.
        seed (int): Random seed. Defaults to 0.
        radius_range (tuple[float, float]): Circumradii of the shapes in pixels. Defaults to
            (12, 30), the bundled scenes'.
        shapes_per_cell (float): Shapes per 128 x 128 block on average. Defaults to 2, the
            bundled scenes' (1-3 each).
    """

    def __init__(self,
                 size: int,
                 seed: int = 0,
                 radius_range: Tuple[float, float] = (12, 30),
                 shapes_per_cell: float = 2.0) -> None:
        if size < 2 * radius_range[1]:
            raise ValueError(f'a continuous scene needs a side of at least '
                             f'{2 * radius_range[1]:g} px (the largest shape), got {size}')
        self.size = size
        # Rows above and below a band that hold whole every shape reaching into it.
        self.margin = int(2 * radius_range[1]) + 4
        self.num_bands = -(-size // SCENE_SIZE)
        layout, *band_seeds = np.random.SeedSequence(seed).spawn(1 + self.num_bands)
        self.band_seeds = band_seeds
        rng = np.random.default_rng(layout)
        self.block_colours = rng.integers(0, BACKGROUND_HIGH, (self.num_bands, self.num_bands, 3))
        self.shapes: List[Shape] = scatter_shapes(rng, size, radius_range, shapes_per_cell,
                                                  SCENE_SIZE)
        self._tops = np.array([shape.centre[1] - shape.radius for shape in self.shapes])
        self._bottoms = np.array([shape.centre[1] + shape.radius for shape in self.shapes])

    def band(self, index: int) -> SceneBand:
        """Rows [128 * index, 128 * (index + 1)) of the scene (fewer in the last band).

        Args:
            index (int): The band, in [0, ``num_bands``).

        Returns:
            SceneBand: The band's image and labels.
        """
        if not 0 <= index < self.num_bands:
            raise IndexError(f'band {index} of a scene of {self.num_bands} bands')
        top = index * SCENE_SIZE
        height = min(SCENE_SIZE, self.size - top)
        base = np.repeat(self.block_colours[index], SCENE_SIZE, 0)[None, :self.size]
        rng = np.random.default_rng(self.band_seeds[index])
        rows = slice(self.margin, self.margin + height)
        canvas = np.zeros((height + 2 * self.margin, self.size, 3), np.uint8)
        canvas[rows] = with_pixel_noise(rng, base, (height, self.size), BACKGROUND_NOISE)
        image = Image.fromarray(canvas)
        labels = Image.new('L', image.size, 0)
        draw, label_draw = ImageDraw.Draw(image), ImageDraw.Draw(labels)
        origin = top - self.margin
        # A pixel of slack either side: PIL may fill the row a vertex lies on.
        reach = (self._bottoms >= top - 1) & (self._tops < top + height + 1)
        for i in np.flatnonzero(reach):
            shape = self.shapes[i]
            polygon = [(x, y - origin) for x, y in shape.polygon]
            draw.polygon(polygon, fill=shape.colour)
            label_draw.polygon(polygon, fill=shape.category + 1)
        return SceneBand(top, np.asarray(image)[rows], np.asarray(labels)[rows])

    def __iter__(self) -> Iterator[SceneBand]:
        return (self.band(index) for index in range(self.num_bands))


def large_scene_bands(kind: str, size: int, seed: int = 0) -> Iterator[SceneBand]:
    """The bands of a large scene of one of :data:`LARGE_SCENE_KINDS`.

    Args:
        kind (str): 'mosaic' or 'continuous'.
        size (int): Side in pixels.
        seed (int): Random seed. Defaults to 0.

    Returns:
        Iterator[SceneBand]: Its bands, top to bottom.
    """
    if kind not in LARGE_SCENE_KINDS:
        raise ValueError(f'unknown large scene kind {kind!r}; allowed: '
                         f'{", ".join(map(repr, LARGE_SCENE_KINDS))}')
    if kind == 'mosaic':
        return mosaic_scene_bands(size, seed)
    return iter(ContinuousScene(size, seed))
