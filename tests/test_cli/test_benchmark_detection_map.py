"""COCO mAP of a large scene's detections: perfect detections score 1, half of the objects
found score COCO's interpolated 51 / 101, thousands of detections in one image all count, and
the ground-truth masks are the polygons as PIL fills them."""
import numpy as np
import pytest
from PIL import Image, ImageDraw
from pycocotools import mask as mask_utils

from mmlinear.cli.benchmark.detection_map import coco_map, polygon_rle, polygons_rle
from mmlinear.cli.benchmark.shape_scene import SHAPE_CLASSES, shape_scene


def squares(count, size=2048, side=20):
    """``count`` squares on a grid of 40 px cells, as boxes, polygons and RLEs."""
    per_row = size // 40
    boxes, polygons = [], []
    for index in range(count):
        x, y = 40 * (index % per_row) + 5, 40 * (index // per_row) + 5
        boxes.append([x, y, x + side, y + side])
        polygons.append([(x, y), (x + side, y), (x + side, y + side), (x, y + side)])
    masks = [polygon_rle(p, size, size) for p in polygons]
    return np.array(boxes, dtype=np.float64), polygons, masks


def test_perfect_detections_of_hundreds_of_objects_of_a_class_score_one():
    boxes, _, masks = squares(300)
    labels = np.zeros(300, dtype=np.int64)
    result = coco_map(boxes, labels, masks, boxes, np.ones(300), labels, masks, (2048, 2048), 2)
    # COCO's own cap (100 detections an image) would count a third of them
    assert result == {'bbox_mAP': 1.0, 'bbox_mAP_50': 1.0, 'segm_mAP': 1.0, 'segm_mAP_50': 1.0}


def test_boxes_off_by_a_fifth_of_their_side_miss_the_strict_thresholds():
    boxes, _, _ = squares(100)
    labels = np.zeros(100, dtype=np.int64)
    # IoU 20 * 16 / (2 * 400 - 20 * 16) = 2 / 3: counted at 0.50 to 0.65, missed above
    shifted = boxes + np.array([4, 0, 4, 0])
    result = coco_map(boxes, labels, None, shifted, np.ones(100), labels, None, (2048, 2048), 1)
    assert result['bbox_mAP_50'] == 1.0
    assert result['bbox_mAP'] == pytest.approx(4 / 10)


def test_half_of_the_objects_found_scores_the_interpolated_half():
    boxes, _, masks = squares(200)
    labels = np.zeros(200, dtype=np.int64)
    found = slice(0, 100)
    result = coco_map(boxes, labels, masks, boxes[found], np.ones(100), labels[found], masks[found],
                      (2048, 2048), 1)
    # precision 1 up to recall 0.5, nothing after: 51 of COCO's 101 recall points
    assert result['bbox_mAP'] == pytest.approx(51 / 101)
    assert result['segm_mAP_50'] == pytest.approx(51 / 101)


def test_a_wrong_class_or_a_box_off_by_half_counts_as_a_miss():
    boxes, _, masks = squares(2)
    labels = np.array([0, 1])
    shifted = boxes + np.array([10, 0, 10, 0])  # IoU 1/3 with its object
    result = coco_map(boxes, labels, None, np.concatenate([shifted[:1], boxes[1:]]), np.ones(2),
                      np.array([0, 0]), None, (2048, 2048), 2)
    assert result == {'bbox_mAP': 0.0, 'bbox_mAP_50': 0.0}  # no segm without masks


def test_polygon_masks_are_the_polygons_as_pil_fills_them():
    scene = shape_scene(256, seed=1)
    assert len(scene.polygons) == len(scene.boxes) > 0
    for polygon, box in zip(scene.polygons, scene.boxes):
        canvas = Image.new('L', (256, 256), 0)
        ImageDraw.Draw(canvas).polygon(polygon, fill=1)
        drawn = np.asarray(canvas)
        assert np.array_equal(mask_utils.decode(polygon_rle(polygon, 256, 256)), drawn)
        rows, cols = np.nonzero(drawn)
        assert cols.min() >= np.floor(box[0]) and cols.max() <= np.ceil(box[2])
    assert set(scene.labels.tolist()) <= set(range(len(SHAPE_CLASSES)))


def test_flat_polygons_are_merged_into_one_mask():
    first, second = [0, 0, 10, 0, 10, 10, 0, 10], [20, 20, 30, 20, 30, 30, 20, 30]
    merged = polygons_rle([first, second, [1, 2]], 64, 64)  # a degenerate one is dropped
    alone = [polygons_rle([p], 64, 64) for p in (first, second)]
    assert mask_utils.area(merged) == sum(mask_utils.area(a) for a in alone) > 0
    assert mask_utils.area(polygons_rle([], 64, 64)) == 0
