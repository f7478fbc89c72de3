import pytest
import torch
from mmcv.ops import RoIAlign

from mmlinear.models import SimpleFeaturePyramid


def test_strides_and_channels_without_out_channels():
    neck = SimpleFeaturePyramid(in_channels=32)
    outs = neck((torch.randn(2, 32, 5, 7), ))
    assert [tuple(o.shape) for o in outs] == [(2, 8, 20, 28), (2, 16, 10, 14), (2, 32, 5, 7),
                                              (2, 32, 3, 4)]


def test_out_channels_and_extra_levels():
    neck = SimpleFeaturePyramid(in_channels=32, out_channels=16, num_outs=5)
    outs = neck(torch.randn(1, 32, 8, 8))
    assert [tuple(o.shape[1:]) for o in outs] == [(16, 32, 32), (16, 16, 16), (16, 8, 8),
                                                  (16, 4, 4), (16, 2, 2)]


def test_gradients_reach_every_branch():
    neck = SimpleFeaturePyramid(in_channels=32, out_channels=16)
    x = torch.randn(1, 32, 4, 4, requires_grad=True)
    sum(o.sum() for o in neck(x)).backward()
    assert all(p.grad is not None for p in neck.parameters())


def test_invalid_options():
    with pytest.raises(ValueError, match='allowed: 4.0, 2.0, 1.0, 0.5'):
        SimpleFeaturePyramid(in_channels=32, scale_factors=(3.0, ))
    with pytest.raises(ValueError, match='divisible by 4'):
        SimpleFeaturePyramid(in_channels=30)
    with pytest.raises(ValueError, match='need out_channels'):
        SimpleFeaturePyramid(in_channels=32, num_outs=5)


@pytest.mark.parametrize('out_channels', [None, 16])
def test_roi_align_pools_every_level_as_laid_out(out_channels):
    # The token map (a transposed view) and LayerNorm2d (a permuted view) are channels-last in
    # memory; mmcv's RoIAlign, which Mask R-CNN's RoI heads use, reads raw NCHW memory.
    neck = SimpleFeaturePyramid(in_channels=32, out_channels=out_channels)
    featmap = torch.randn(2, 8 * 8, 32).transpose(1, 2).reshape(2, 32, 8, 8)
    rois = torch.tensor([[0., 2., 3., 20., 30.], [1., 10., 4., 28., 25.]])
    roi_align = RoIAlign(7, spatial_scale=0.25, sampling_ratio=0)
    with torch.no_grad():
        outs = neck(featmap)
    for level in outs:
        assert level.is_contiguous()
        expected = roi_align(level.clone(memory_format=torch.contiguous_format), rois)
        torch.testing.assert_close(roi_align(level, rois), expected)
