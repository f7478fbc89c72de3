"""class_map_iou: mmseg's IoU figures for a class map, counted a block of rows at a time."""
import math

import numpy as np
import pytest

from mmlinear.apis import class_map_iou as module
from mmlinear.apis.class_map_iou import class_map_iou


def test_a_known_case_across_blocks(monkeypatch):
    monkeypatch.setattr(module, 'IOU_BLOCK_ROWS', 2)  # 5 rows: blocks of 2, 2 and 1
    label = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0], [2, 2, 0, 0], [2, 2, 255, 255]])
    prediction = np.array([[0, 0, 1, 0], [0, 0, 1, 1], [0, 1, 0, 0], [2, 0, 0, 0], [2, 2, 3, 1]])
    result = class_map_iou(prediction, label[..., None], num_classes=4)
    # background: 9 right of 10 labelled, 2 more predicted -> 9 / 12; circle: 3 of 4 and one
    # more predicted -> 3 / 5; square 3 / 4; class 3 neither labelled nor predicted where
    # counted (its only prediction is on an ignored pixel) -> NaN, left out of the mean.
    assert result['IoU'][:3] == pytest.approx([75.0, 60.0, 75.0])
    assert math.isnan(result['IoU'][3])
    assert result['mIoU'] == pytest.approx(70.0)
    assert result['aAcc'] == pytest.approx(100 * 15 / 18)


def test_maps_of_different_sizes_are_refused():
    with pytest.raises(ValueError, match='the class map is 4 x 4, the label map 4 x 5'):
        class_map_iou(np.zeros((4, 4)), np.zeros((4, 5)), 2)
