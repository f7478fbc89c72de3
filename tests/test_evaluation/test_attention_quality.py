import json
import os.path as osp
from itertools import product

import numpy as np
import pytest
import torch

from mmlinear.apis import list_images
from mmlinear.evaluation import attention_quality as quality


def brute_force_auc(scores, labels):
    pos, neg = scores[labels], scores[~labels]
    wins = sum((p > n) + 0.5 * (p == n) for p, n in product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_roc_auc_equals_pair_counting_with_ties():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 200).astype(float)  # many ties
    labels = rng.random(200) < 0.3
    assert quality.roc_auc(scores, labels) == pytest.approx(brute_force_auc(scores, labels))
    assert quality.roc_auc(labels.astype(float), labels) == 1.0
    assert quality.roc_auc(-labels.astype(float), labels) == 0.0
    assert np.isnan(quality.roc_auc(scores, np.ones(200, bool)))


def test_average_precision_by_hand():
    # Ranked: hit, miss, hit, miss -> precision 1 at recall 1/2, 2/3 at recall 1.
    assert quality.average_precision([.9, .8, .7, .6],
                                     [1, 0, 1, 0]) == pytest.approx(.5 * 1 + .5 * 2 / 3)
    # A tie between a hit and a miss is one threshold: precision 1/2 at recall 1.
    assert quality.average_precision([.5, .5], [1, 0]) == pytest.approx(.5)
    assert np.isnan(quality.average_precision([.1, .2], [0, 0]))


def test_area_over_curve():
    assert quality.area_over_curve([0.8, 0.4, 0.0]) == pytest.approx(75.)
    assert quality.area_over_curve([0.5, 0.5, 0.5]) == 0.
    with pytest.raises(ValueError, match='at least one step'):
        quality.area_over_curve([0.5])


class TopLeftPatchClassifier(torch.nn.Module):
    """Two classes whose logit gap is the pixel sum of the top-left 16 x 16 patch."""

    def forward(self, x):
        s = x[:, :, :16, :16].sum((1, 2, 3)) / 256
        return torch.stack([s, -s], 1)


def test_morf_removes_the_evidence_first_and_lerf_last():
    x = torch.ones(1, 3, 32, 32)  # 2 x 2 patches
    saliency = torch.tensor([[[4., 3.], [2., 1.]]])  # the top-left patch ranks first
    model = TopLeftPatchClassifier()
    p0 = torch.sigmoid(torch.tensor(6.)).item()  # logits 3 and -3
    morf = quality.perturbation_curve(model, x, saliency, 'morf', steps=4, patch_size=16)
    lerf = quality.perturbation_curve(model, x, saliency, 'lerf', steps=4, patch_size=16)
    torch.testing.assert_close(morf[0], torch.tensor([p0, .5, .5, .5, .5]))
    torch.testing.assert_close(lerf[0], torch.tensor([p0, p0, p0, p0, .5]))
    assert quality.area_over_curve(morf[0].tolist()) == pytest.approx((p0 - .5) / p0 * 100)
    assert quality.area_over_curve(lerf[0].tolist()) == pytest.approx((p0 - .5) / p0 * 25)
    with pytest.raises(ValueError, match='allowed: morf, lerf'):
        quality.perturbation_curve(model, x, saliency, 'random', 4, 16)


def test_boxes_from_coco_and_voc_xml(tiny_data, tmp_path):
    images = osp.join(tiny_data, 'coco', 'images', 'val')
    files = list_images([images], 3)
    ann = osp.join(tiny_data, 'coco', 'annotations', 'instances_val.json')
    boxes = quality.load_boxes(ann, files)
    with open(ann) as f:
        coco = json.load(f)
    first = next(im for im in coco['images'] if im['file_name'] == osp.basename(files[0]))
    expected = [a['bbox'] for a in coco['annotations'] if a['image_id'] == first['id']]
    assert expected and len(boxes[files[0]]) == len(expected)
    for (x1, y1, x2, y2), xywh in zip(boxes[files[0]], expected):
        assert [x1, y1, x2 - x1, y2 - y1] == pytest.approx(xywh)

    image = tmp_path / 'n01_1.JPEG'
    image.write_bytes(b'')
    (tmp_path / 'n01_1.xml').write_text(
        '<annotation><size><width>100</width><height>50</height></size><object><name>n01'
        '</name><bndbox><xmin>10</xmin><ymin>5</ymin><xmax>60</xmax><ymax>25</ymax></bndbox>'
        '</object></annotation>')
    voc = quality.load_boxes(str(tmp_path), [str(image)])
    assert voc == {str(image): [[10., 5., 60., 25.]]}
    mask = quality.box_mask(voc[str(image)], (50, 100), (25, 50))  # shown at half size
    # Rows 2.5..12.5 at half size: every pixel the box touches counts (rows 2..12).
    assert mask.sum() == 11 * 25 and mask[2:13, 5:30].all()


def test_only_known_saliency_sources():
    with pytest.raises(ValueError, match='allowed: attention, random'):
        quality.check_saliency_source(
            torch.nn.Linear(1, 1), 'gradient', 'configs/demo/infvit-demo-none_shapes-cls.py')
