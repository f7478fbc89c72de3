"""mmlinear.LinearHead and LinearDepthHead: the linear probes of the frozen dense evaluations."""
import pytest
import torch
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.structures import SegDataSample

from mmlinear.models import LinearDepthHead, LinearHead


def test_linear_head_is_batchnorm_then_a_1x1_convolution():
    torch.manual_seed(0)
    head = LinearHead(in_channels=8, num_classes=3).eval()
    with torch.no_grad():
        head.bn.running_mean.uniform_(-1, 1)
        head.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 8, 5, 6)
    bn = head.bn
    normed = (x - bn.running_mean[:, None, None]) / torch.sqrt(bn.running_var[:, None, None] +
                                                               bn.eps)
    normed = normed * bn.weight[:, None, None] + bn.bias[:, None, None]
    expected = torch.einsum('kc,bchw->bkhw', head.conv_seg.weight[:, :, 0, 0], normed)
    expected = expected + head.conv_seg.bias[:, None, None]
    torch.testing.assert_close(head([x]), expected)
    assert head.channels == 8 and head.dropout is None


def test_linear_head_concatenates_several_levels():
    head = LinearHead(
        in_channels=[4, 6], in_index=[0, 1], input_transform='resize_concat', num_classes=2)
    out = head([torch.randn(1, 4, 8, 8), torch.randn(1, 6, 4, 4)])
    assert head.channels == 10 and out.shape == (1, 2, 8, 8)


def depth_head(**kwargs):
    # Built under another toolbox's default scope, as a test run before may leave it.
    init_default_scope('mmdet')
    torch.manual_seed(0)
    return LinearDepthHead(in_channels=8, num_bins=5, min_depth=1., max_depth=5., **kwargs)


def test_depth_is_the_adabins_linear_readout_of_the_bin_scores():
    head = depth_head(upsample=2).eval()
    x = torch.randn(2, 8, 3, 4)
    with torch.no_grad():
        depth = head([x])
        up = torch.nn.functional.interpolate(x, scale_factor=2, mode='bilinear')
        scores = head.conv_seg(head.bn(up))
    weights = scores.relu() + 0.1
    weights = weights / weights.sum(1, keepdim=True)
    centres = torch.tensor([1., 2., 3., 4., 5.])
    expected = (weights * centres[:, None, None]).sum(1, keepdim=True)
    assert depth.shape == (2, 1, 6, 8)
    torch.testing.assert_close(depth, expected)
    assert bool(((depth >= 1) & (depth <= 5)).all())


def test_depth_loss_is_the_silog_of_the_resized_prediction_on_valid_pixels():
    head = depth_head().train()
    samples = []
    for _ in range(2):
        sample = SegDataSample()
        target = torch.rand(1, 32, 32) * 4 + 1
        target[:, :4] = 0  # missing depth: ignored by the loss
        sample.gt_depth_map = PixelData(data=target)
        samples.append(sample)
    features = [torch.randn(2, 8, 4, 4, requires_grad=True)]
    losses = head.loss_by_feat(head(features), samples)
    assert list(losses) == ['loss_silog'] and torch.isfinite(losses['loss_silog'])
    losses['loss_silog'].backward()
    assert head.conv_seg.weight.grad.abs().sum() > 0


@pytest.mark.parametrize('kwargs,message', [
    (dict(num_bins=1), 'num_bins must be >= 2, got 1'),
    (dict(min_depth=5., max_depth=1.), 'need 0 < min_depth < max_depth, got 5.0, 1.0'),
])
def test_depth_head_options_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LinearDepthHead(in_channels=8, **kwargs)
