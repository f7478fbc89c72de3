"""Recall and precision of detections (one-to-one matches by IoU, best scores first) and the
objects that no tile holds whole."""
import importlib.util

import numpy as np
import pytest

from mmlinear.cli.benchmark.detection_recall import (box_iou, crossing_tiles, match_detections,
                                                     recall_report, slice_grid)

GT = np.array([[0, 0, 10, 10], [26, 26, 40, 40], [50, 0, 70, 30.]])
GT_LABELS = np.array([0, 1, 2])


def test_box_iou():
    iou = box_iou(np.array([[0, 0, 10, 10.], [5, 0, 15, 10]]), np.array([[0, 0, 10, 10.]]))
    np.testing.assert_allclose(iou[:, 0], [1.0, 50 / 150])


def test_matches_are_one_to_one_by_class_and_iou():
    boxes = np.array([[0, 0, 10, 10], [1, 0, 10, 10], [26, 26, 40, 40], [50, 0, 70, 30.]])
    scores = np.array([0.5, 0.9, 0.8, 0.7])
    labels = np.array([0, 0, 0, 2])  # the third has the wrong class
    found, hits = match_detections(GT, GT_LABELS, boxes, scores, labels)
    assert found.tolist() == [True, False, True]
    # The better-scored duplicate takes the first object; the other is a false positive.
    assert hits.tolist() == [False, True, False, True]
    weak = match_detections(GT, GT_LABELS, np.array([[0, 0, 10, 4.]]), np.ones(1), np.zeros(1, int))
    assert not weak[0].any()  # IoU 0.4 < 0.5


def test_crossing_objects_and_report():
    tiles = [[0, 0, 32, 32], [24, 0, 56, 32], [0, 24, 32, 56], [24, 24, 56, 56]]
    crossing = crossing_tiles(GT, tiles)
    # The first lies inside a tile, the second inside the overlap's tile, the third in none.
    assert crossing.tolist() == [False, False, True]
    report = recall_report(GT, GT_LABELS, crossing, GT[[0, 2]], np.array([0.9, 0.8]),
                           np.array([0, 2]))
    assert report == dict(
        objects=3,
        crossing_objects=1,
        detections=2,
        found=2,
        found_crossing=1,
        recall=2 / 3,
        recall_crossing=1.0,
        precision=1.0)


def test_slice_grid():
    assert slice_grid(100, 130, 64, 0.25) == [[0, 0, 64, 64], [48, 0, 112, 64], [66, 0, 130, 64],
                                              [0, 36, 64, 100], [48, 36, 112, 100],
                                              [66, 36, 130, 100]]
    assert slice_grid(50, 50, 64, 0.2) == [[0, 0, 50, 50]]


@pytest.mark.skipif(importlib.util.find_spec('sahi') is None, reason='SAHI is not installed')
@pytest.mark.parametrize('shape, tile, overlap', [((4096, 4096), 128, 0.2), ((1000, 700), 128, 0.2),
                                                  ((300, 257), 64, 0.5), ((100, 100), 128, 0.)])
def test_slice_grid_is_sahis(shape, tile, overlap):
    from sahi.slicing import get_slice_bboxes
    assert slice_grid(*shape, tile, overlap) == get_slice_bboxes(
        image_height=shape[0],
        image_width=shape[1],
        slice_height=tile,
        slice_width=tile,
        overlap_height_ratio=overlap,
        overlap_width_ratio=overlap)
