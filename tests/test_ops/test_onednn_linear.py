"""mmlinear.ops.onednn_linear: F.linear through oneDNN at inference on the CPU, F.linear
wherever a gradient, another dtype, a dispatch mode or an export needs it."""
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from mmlinear.ops import onednn_linear, runs_onednn


def inputs(*leading, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*leading, 48, generator=g).to(dtype)
    weight = (torch.randn(80, 48, generator=g) / 7).to(dtype)
    bias = torch.randn(80, generator=g).to(dtype)
    return x, weight, bias


@pytest.mark.parametrize('leading', [(5, ), (2, 7)])
@pytest.mark.parametrize('with_bias', [True, False])
def test_inference_matches_f_linear(leading, with_bias):
    x, weight, bias = inputs(*leading)
    bias = bias if with_bias else None
    expected = F.linear(x, weight, bias)
    with torch.no_grad():
        assert runs_onednn(x, weight, bias) == torch.backends.mkldnn.is_available()
        out = onednn_linear(x, weight, bias)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_a_transposed_weight_is_read_as_it_is():
    x, weight, bias = inputs(6)
    stored = weight.t().contiguous()  # (in, out), as the dynamic linear layer keeps it
    with torch.no_grad():
        out = onednn_linear(x, stored.t(), bias)
    torch.testing.assert_close(out, x @ stored + bias, atol=1e-5, rtol=1e-5)


def test_when_a_gradient_is_needed_it_is_f_linear_exactly():
    x, weight, bias = inputs(3, 5)
    x.requires_grad_()
    assert not runs_onednn(x, weight, bias)
    out = onednn_linear(x, weight, bias)
    assert torch.equal(out, F.linear(x, weight, bias))
    out.sum().backward()
    assert x.grad is not None


def test_other_dtypes_modes_and_exports_fall_back():
    x, weight, bias = inputs(4)
    with torch.no_grad():
        assert not runs_onednn(x.double(), weight.double(), bias.double())
        assert not runs_onednn(x, weight.double(), bias)  # mixed: F.linear's own error
        with FlopCounterMode(display=False) as counter:
            assert not runs_onednn(x, weight, bias)
            onednn_linear(x, weight, bias)
        assert counter.get_total_flops() == 2 * 4 * 48 * 80


def test_autocast_casts_as_it_does_for_f_linear():
    x, weight, bias = inputs(4)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        out = onednn_linear(x, weight, bias)
        expected = F.linear(x, weight, bias)
    assert out.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected.float(), atol=5e-2, rtol=2e-2)
