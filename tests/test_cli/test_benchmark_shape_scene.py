"""shape_scene: a large scene of non-overlapping shapes at the demo scale, boxes that hold
each drawn shape, and the same scene for the same seed."""
import numpy as np

from mmlinear.cli.benchmark.shape_scene import SHAPE_CLASSES, shape_scene


def test_shapes_are_where_their_boxes_say_and_do_not_overlap():
    scene = shape_scene(512, seed=3)
    assert scene.image.shape == (512, 512, 3) and scene.image.dtype == np.uint8
    # About two shapes per 128 x 128 block, of every class.
    assert 24 <= len(scene.boxes) <= 32
    assert set(scene.labels.tolist()) == set(range(len(SHAPE_CLASSES)))
    sides = scene.boxes[:, 2:] - scene.boxes[:, :2]
    assert (sides > 10).all() and (sides <= 60).all()
    # Shapes are bright (every channel >= 120), the background dark (<= 89 + 12).
    bright = (scene.image >= 120).all(axis=2)
    covered = np.zeros_like(bright)
    for x1, y1, x2, y2 in scene.boxes.round().astype(int):
        box = bright[max(y1 - 1, 0):y2 + 1, max(x1 - 1, 0):x2 + 1]
        assert box.mean() > 0.3  # the shape fills much of its box
        covered[max(y1 - 1, 0):y2 + 1, max(x1 - 1, 0):x2 + 1] = True
    assert not (bright & ~covered).any()
    assert (scene.image[~bright] <= 101).all()


def test_same_seed_same_scene():
    first, second = shape_scene(256, seed=1), shape_scene(256, seed=1)
    assert np.array_equal(first.image, second.image)
    assert np.array_equal(first.boxes, second.boxes)
    assert not np.array_equal(first.image, shape_scene(256, seed=2).image)
