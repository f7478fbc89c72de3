"""mmcv's nms and RoIAlign work inside CPU bfloat16 autocast once CPUAmpOptimWrapper exists."""
import pytest
import torch
from mmcv.ops import RoIAlign, nms
from torch import nn

from mmlinear.engine import CPUAmpOptimWrapper


@pytest.fixture(scope='module', autouse=True)
def cpu_amp_wrapper():
    """Building the optimizer wrapper applies the shim, as a training run does."""
    model = nn.Linear(2, 2)
    return CPUAmpOptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))


def boxes_and_scores():
    generator = torch.Generator().manual_seed(0)
    corners = torch.rand(50, 2, generator=generator) * 50
    boxes = torch.cat([corners, corners + 5 + torch.rand(50, 2, generator=generator) * 20], 1)
    return boxes, torch.rand(50, generator=generator)


def test_nms_under_cpu_autocast_gives_the_float32_result_of_its_inputs():
    boxes, scores = boxes_and_scores()
    boxes, scores = boxes.bfloat16(), scores.bfloat16()  # as the RPN hands them over
    with torch.autocast('cpu', dtype=torch.bfloat16):
        _, keep_amp = nms(boxes, scores, 0.5)
    _, keep_expected = nms(boxes.float(), scores.float(), 0.5)
    assert torch.equal(keep_amp, keep_expected) and 0 < len(keep_amp) < len(boxes)


def test_roi_align_under_cpu_autocast_returns_the_callers_dtype_with_gradients():
    torch.manual_seed(0)
    features = torch.randn(2, 4, 16, 16, requires_grad=True)
    rois = torch.tensor([[0, 1., 1., 9., 9.], [1, 2., 3., 14., 12.]])
    roi_align = RoIAlign(output_size=4, spatial_scale=1.0, sampling_ratio=2)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        low = features.bfloat16()
        out = roi_align(low, rois.bfloat16())
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert features.grad is not None and torch.isfinite(features.grad).all()
    expected = roi_align(features.detach().bfloat16().float(), rois)
    torch.testing.assert_close(out.float(), expected, atol=0.05, rtol=0.02)


def test_outside_autocast_the_ops_are_unchanged():
    features = torch.randn(1, 2, 8, 8, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor([[0, 1., 1., 6., 6.]], dtype=torch.float64)
    roi_align = RoIAlign(output_size=2, spatial_scale=1.0, sampling_ratio=2)
    assert roi_align(features, rois).dtype == torch.float64
    with pytest.raises(RuntimeError, match='expected scalar type'):
        nms(*[t.bfloat16() for t in boxes_and_scores()], 0.5)  # mmcv's own limit, no autocast
