"""mmlinear.utils.shape_scenes: the demo scenes' pieces, drawn alike from either kind of
NumPy stream."""
import math

import numpy as np
import pytest

from mmlinear.utils.shape_geometry import SHAPE_CLASSES
from mmlinear.utils.shape_scenes import (bright_colour, demo_scene, noisy_background, overlaps,
                                         random_integers)


@pytest.mark.parametrize('make', [np.random.RandomState, np.random.default_rng])
def test_random_integers_are_the_streams_own(make):
    native = make(4)
    draw = native.integers if isinstance(native, np.random.Generator) else native.randint
    expected = [draw(3), draw(120, 256, 3), draw(-12, 13, (2, 2, 3))]
    rng = make(4)
    got = [
        random_integers(rng, 3),
        random_integers(rng, 120, 256, 3),
        random_integers(rng, -12, 13, (2, 2, 3))
    ]
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_backgrounds_are_dark_shapes_bright():
    rng = np.random.default_rng(0)
    one = np.asarray(noisy_background(rng, 16, noise=5))
    assert one.shape == (16, 16, 3) and one.max() <= 89 + 5
    blocks = np.asarray(noisy_background(rng, 20, cell=8)).astype(int)  # 3 x 3 blocks, cut
    assert blocks.shape == (20, 20, 3) and blocks.max() <= 89 + 12
    assert all(120 <= c <= 255 for c in bright_colour(rng))


def test_overlaps_keeps_a_gap_of_two_pixels():
    assert overlaps(0., 0., 5., [(12., 0., 5.)])  # 2 px between the circles: too close
    assert not overlaps(0., 0., 5., [(12.01, 0., 5.)])
    assert not overlaps(0., 0., 5., [])


def test_demo_scene_labels_every_shape_and_none_overlap():
    for seed in range(5):
        img, label_map, instances = demo_scene(np.random.RandomState(seed), 128)
        assert img.size == (128, 128) and label_map.shape == (128, 128)
        assert 1 <= len(instances) <= 3
        assert set(np.unique(label_map)) <= {0} | {i['category'] + 1 for i in instances}
        for inst in instances:
            assert inst['category'] in range(len(SHAPE_CLASSES))
        centres = [np.mean(inst['polygon'], 0) for inst in instances]
        for i, a in enumerate(centres):
            for b in centres[i + 1:]:
                assert math.hypot(*(a - b)) > 12 + 12 + 2
