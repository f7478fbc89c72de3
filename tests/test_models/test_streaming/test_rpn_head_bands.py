"""RPNHeadBands (proposals from bands of each pyramid level, the best anchors kept band by
band, one NMS over the image) against mmdet's RPNHead.predict on the whole levels."""
import pytest
import torch
from mmdet.models.dense_heads import RetinaHead, RPNHead
from mmdet.structures import DetDataSample
from mmengine.config import ConfigDict
from mmengine.registry import init_default_scope

from mmlinear.models.streaming.rpn_head_bands import RPNHeadBands


@pytest.fixture(autouse=True)
def mmdet_scope():
    """mmdet's heads build their anchor generators and box coders in the default scope,
    which an earlier test in the same process may have left on another toolbox."""
    init_default_scope('mmdet')


def rpn_head(nms_pre):
    torch.manual_seed(0)
    head = RPNHead(
        in_channels=8,
        feat_channels=8,
        anchor_generator=dict(
            type='AnchorGenerator', scales=[8], ratios=[0.5, 1.0, 2.0], strides=[4, 8, 16]),
        test_cfg=ConfigDict(
            nms_pre=nms_pre,
            max_per_img=50,
            nms=dict(type='nms', iou_threshold=0.7),
            min_bbox_size=0))
    return head.eval()


@pytest.mark.parametrize('nms_pre', [-1, 30, 100000])
@pytest.mark.parametrize('rows', [1, 3, 100])
def test_equals_rpn_head_predict(nms_pre, rows):
    head = rpn_head(nms_pre)
    torch.manual_seed(1)
    levels = [torch.randn(1, 8, 26, 18), torch.randn(1, 8, 13, 9), torch.randn(1, 8, 7, 5)]
    meta = dict(img_shape=(104, 72), ori_shape=(104, 72), scale_factor=(1.0, 1.0))
    with torch.no_grad():
        expected = head.predict(tuple(levels), [DetDataSample(metainfo=meta)], rescale=False)[0]
        bands = RPNHeadBands(head, lambda level, span: levels[level][:, :, span[0]:span[1]],
                             [tuple(level.shape[2:]) for level in levels])
        got = bands.proposals(rows, meta)
    assert len(expected) == 50 and len(got) == len(expected)
    torch.testing.assert_close(got.bboxes, expected.bboxes, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(got.scores, expected.scores, rtol=1e-5, atol=1e-6)


def test_other_dense_heads_are_refused():
    head = RetinaHead(num_classes=3, in_channels=8, feat_channels=8)
    with pytest.raises(TypeError, match="need mmdet's RPNHead .*got RetinaHead"):
        RPNHeadBands(head, None, [])
