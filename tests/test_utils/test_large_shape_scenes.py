"""mmlinear.utils.large_shape_scenes: the mosaic of bundled scenes and the continuous scene,
made band by band."""
import numpy as np
import pytest
from PIL import Image, ImageDraw

from mmlinear.utils.large_shape_scenes import (SCENE_SIZE, ContinuousScene, large_scene_bands,
                                               mosaic_scene_bands)
from mmlinear.utils.shape_scenes import BRIGHT_LOW, SHAPE_GAP, demo_scene


def whole(bands):
    """The bands put together: (image, labels)."""
    bands = list(bands)
    assert [band.top for band in bands] == list(range(0, len(bands) * SCENE_SIZE, SCENE_SIZE))
    return (np.concatenate([band.image
                            for band in bands]), np.concatenate([band.labels for band in bands]))


def test_continuous_scene_is_deterministic_given_its_seed():
    first, second = whole(ContinuousScene(300, seed=4)), whole(ContinuousScene(300, seed=4))
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    other = whole(ContinuousScene(300, seed=5))
    assert not np.array_equal(first[0], other[0])
    # A band does not depend on the bands made before it.
    np.testing.assert_array_equal(ContinuousScene(300, seed=4).band(2).image, first[0][256:])


@pytest.mark.parametrize('seed', [1, 2])
def test_continuous_labels_are_the_shapes_drawn_on_the_whole_image(seed):
    """The reference: every shape drawn at once on one whole label map, and the image's
    pixels: each shape's colour on its labels, dark background elsewhere. 520 px: the last
    band is cut."""
    scene = ContinuousScene(520, seed=seed)
    image, labels = whole(scene)
    assert image.shape == (520, 520, 3) and labels.shape == (520, 520)
    reference = Image.new('L', (520, 520), 0)
    draw = ImageDraw.Draw(reference)
    for shape in scene.shapes:
        draw.polygon(shape.polygon, fill=shape.category + 1)
    np.testing.assert_array_equal(labels, np.asarray(reference))
    colours = Image.new('RGB', (520, 520), 0)
    for shape in scene.shapes:
        ImageDraw.Draw(colours).polygon(shape.polygon, fill=shape.colour)
    shapes = labels > 0
    np.testing.assert_array_equal(image[shapes], np.asarray(colours)[shapes])
    assert image[~shapes].max() < BRIGHT_LOW
    assert set(np.unique(labels)) == {0, 1, 2, 3}


def test_continuous_shapes_cross_tile_borders_and_never_overlap():
    scene = ContinuousScene(1024, seed=0)
    # About two shapes per 128 x 128 block, as in the bundled scenes.
    assert 1.8 * 64 <= len(scene.shapes) <= 2 * 64
    centres = np.array([shape.centre for shape in scene.shapes])
    radii = np.array([shape.radius for shape in scene.shapes])
    # A shape crosses a line of the 128-pixel grid when its circumcircle reaches over it.
    crossing = ((centres - radii[:, None]) // SCENE_SIZE
                != (centres + radii[:, None]) // SCENE_SIZE).any(1)
    assert crossing.mean() > 0.3
    gaps = np.hypot(*(centres[:, None] - centres[None]).transpose(2, 0, 1))
    gaps -= radii[:, None] + radii[None]
    np.fill_diagonal(gaps, np.inf)
    assert gaps.min() > SHAPE_GAP


def test_mosaic_is_the_bundled_scenes_side_by_side():
    image, labels = whole(mosaic_scene_bands(300, seed=2))
    assert image.shape == (300, 300, 3)
    rng = np.random.RandomState(2 + 7)
    for row in range(3):
        for col in range(3):
            scene, label_map, _ = demo_scene(rng, SCENE_SIZE)
            window = np.s_[row * 128:(row + 1) * 128, col * 128:(col + 1) * 128]
            h, w = labels[window].shape
            np.testing.assert_array_equal(image[window], np.asarray(scene)[:h, :w])
            np.testing.assert_array_equal(labels[window], label_map[:h, :w])


def test_bad_kind_and_size_are_refused():
    with pytest.raises(ValueError, match="allowed: 'mosaic', 'continuous'"):
        large_scene_bands('tiles', 256)
    with pytest.raises(ValueError, match='at least 60 px'):
        ContinuousScene(40)
    with pytest.raises(IndexError):
        ContinuousScene(256).band(2)
