"""mmlinear.utils.shape_geometry: the demo shapes' polygons, shared by the data generator and
the benchmark's large scene."""
import math

import pytest

from mmlinear.utils.shape_geometry import SHAPE_CLASSES, SIDES, UPRIGHT, shape_polygon


@pytest.mark.parametrize('kind', SHAPE_CLASSES)
def test_vertices_lie_on_the_circumcircle(kind):
    points = shape_polygon(kind, 40., 30., 12., UPRIGHT[kind])
    assert len(points) == SIDES[kind]
    for x, y in points:
        assert math.hypot(x - 40., y - 30.) == pytest.approx(12.)


def test_upright_shapes_stand_as_the_demo_draws_them():
    # Image y grows downwards: a triangle pointing up has one vertex above the centre.
    triangle = shape_polygon('triangle', 0., 0., 10., UPRIGHT['triangle'])
    assert min(y for _, y in triangle) == pytest.approx(-10.)
    assert sum(y < 0 for _, y in triangle) == 1
    square = shape_polygon('square', 0., 0., 10., UPRIGHT['square'])
    xs = sorted(round(x, 6) for x, _ in square)
    assert xs[0] == xs[1] and xs[2] == xs[3]  # axis-aligned: two vertices per vertical side


def test_an_unknown_shape_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"'hexagon'.*'circle', 'square', 'triangle'"):
        shape_polygon('hexagon', 0., 0., 1., 0.)
