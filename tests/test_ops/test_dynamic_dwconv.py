"""The per-sample depthwise convolution kernel against its grouped-conv reference."""
import pytest
import torch
import torch.nn.functional as F
from op_fixtures import device  # noqa: F401 (pytest fixtures)

from mmlinear.ops import depthwise_conv2d, dynamic_dwconv2d, dynamic_dwconv2d_reference


def make_inputs(device, dtype=torch.float64, B=2, C=3, H=6, W=5, ks=3, bias='shared', seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, C, H, W, generator=g, dtype=torch.float64)
    weight = torch.randn(B, C, ks, ks, generator=g, dtype=torch.float64)
    shapes = {'shared': (C, ), 'per_sample': (B, C), None: None}
    b = None if bias is None else torch.randn(shapes[bias], generator=g, dtype=torch.float64)
    return [
        None if t is None else t.to(device=device, dtype=dtype).requires_grad_()
        for t in (x, weight, b)
    ]


def outputs_and_grads(fn, x, weight, bias):
    out = fn(x, weight, bias)
    grad = torch.randn(
        out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(out)
    inputs = [t for t in (x, weight, bias) if t is not None]
    return (out, *torch.autograd.grad(out, inputs, grad))


def test_reference_is_one_depthwise_conv_per_sample():
    x, weight, bias = make_inputs('cpu', bias='per_sample')
    out = dynamic_dwconv2d_reference(x, weight, bias)
    for i in range(2):
        torch.testing.assert_close(
            out[i],
            F.conv2d(x[i:i + 1], weight[i, :, None], bias[i], padding=1, groups=3)[0])
    shared = dynamic_dwconv2d_reference(x, weight, bias[0])
    torch.testing.assert_close(shared[1],
                               F.conv2d(x[1:], weight[1, :, None], bias[0], padding=1, groups=3)[0])


@pytest.mark.parametrize('ks', [1, 3, 5, 7])
@pytest.mark.parametrize('bias', [None, 'shared', 'per_sample'])
def test_matches_reference_in_float64(device, ks, bias):
    # 4 x 9 is smaller than a 5 x 5 or 7 x 7 window in one direction: every border case.
    inputs = make_inputs(device, H=4, W=9, ks=ks, bias=bias)
    got = outputs_and_grads(dynamic_dwconv2d, *inputs)
    expected = outputs_and_grads(dynamic_dwconv2d_reference, *inputs)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def test_matches_reference_in_float32(device):
    inputs = make_inputs(device, dtype=torch.float32, B=2, C=16, H=33, W=20, ks=3)
    for a, b in zip(
            outputs_and_grads(dynamic_dwconv2d, *inputs),
            outputs_and_grads(dynamic_dwconv2d_reference, *inputs)):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_types(device, dtype):
    if device.type == 'cpu' and dtype == torch.float16:
        pytest.skip('float16 convolutions of the reference are slow or missing on CPU')
    x, weight, bias = (t.detach() for t in make_inputs(device, dtype=dtype, C=8, H=12, W=12))
    out = dynamic_dwconv2d(x, weight, bias)
    assert out.dtype == dtype
    expected = dynamic_dwconv2d_reference(x.double(), weight.double(), bias.double())
    torch.testing.assert_close(out.double(), expected, atol=5e-2, rtol=2e-2)


@pytest.mark.parametrize('bias', [None, 'shared', 'per_sample'])
def test_gradcheck(device, bias):
    x, weight, b = make_inputs(device, B=2, C=2, H=4, W=3, ks=3, bias=bias)
    inputs = tuple(t for t in (x, weight, b) if t is not None)
    assert torch.autograd.gradcheck(
        lambda *t: dynamic_dwconv2d(t[0], t[1], t[2] if len(t) > 2 else None),
        inputs,
        eps=1e-6,
        atol=1e-7)


def test_non_contiguous_inputs(device):
    x, weight, bias = make_inputs(device, H=5, W=5)
    x_t, weight_t = x.transpose(2, 3), weight.transpose(2, 3)
    assert not x_t.is_contiguous() and not weight_t.is_contiguous()
    torch.testing.assert_close(
        dynamic_dwconv2d(x_t, weight_t, bias),
        dynamic_dwconv2d_reference(x_t, weight_t, bias),
        atol=1e-10,
        rtol=1e-10)


@pytest.mark.parametrize('ks', [1, 3, 5])
@pytest.mark.parametrize('bias', [None, 'shared', 'per_sample'])
def test_channels_last_inputs_as_tokens_lay_them_out(device, ks, bias):
    """Row-major tokens (B, N, C) seen as a map are channels-last: the same results and
    gradients, and a channels-last output on the CPU, which convolves that layout in place of
    transposing it."""
    x, weight, b = make_inputs(device, H=4, W=9, ks=ks, bias=bias)
    tokens = x.detach().flatten(2).transpose(1, 2).contiguous().requires_grad_()
    inputs = [tokens] + [t for t in (weight, b) if t is not None]

    def run(fn):
        x_map = tokens.transpose(1, 2).reshape(x.shape)
        assert x_map.is_contiguous(memory_format=torch.channels_last)
        assert not x_map.is_contiguous()
        out = fn(x_map, weight, b)
        grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out)
        return (out, *torch.autograd.grad(out, inputs, grad))

    got, expected = run(dynamic_dwconv2d), run(dynamic_dwconv2d_reference)
    for a, e in zip(got, expected):
        torch.testing.assert_close(a, e, atol=1e-10, rtol=1e-10)
    if device.type == 'cpu':
        assert got[0].is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize('sizes', [dict(B=0), dict(C=0), dict(H=0), dict(W=0)])
def test_zero_size_inputs(device, sizes):
    x, weight, bias = make_inputs(device, bias=None, **sizes)
    out = dynamic_dwconv2d(x, weight, bias)
    assert out.shape == x.shape
    grads = torch.autograd.grad(out.sum(), (x, weight), allow_unused=True)
    assert grads[0].shape == x.shape
    assert grads[1] is None or (grads[1] == 0).all()


def test_clear_errors():
    x, weight, bias = make_inputs('cpu')
    with pytest.raises(ValueError, match=r'\(B, C, k, k\) = \(2, 3, k, k\)'):
        dynamic_dwconv2d(x, weight[:1])
    with pytest.raises(ValueError, match='must be odd'):
        dynamic_dwconv2d(x, weight[..., :2, :2])
    with pytest.raises(ValueError, match=r'bias must have shape \(C,\) = \(3,\) or \(B, C\)'):
        dynamic_dwconv2d(x, weight, bias[:2])
    with pytest.raises(ValueError, match='one device'):
        dynamic_dwconv2d(x, weight.to('meta'), bias)
    with pytest.raises(ValueError, match='one floating dtype'):
        dynamic_dwconv2d(x, weight.float(), bias)
    with pytest.raises(ValueError, match='4-D'):
        dynamic_dwconv2d(x[0], weight, bias)


@pytest.mark.parametrize('channels_last', [False, True])
def test_a_shared_kernel_depthwise_convolution_is_f_conv2d(channels_last):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 6, 5, 7, generator=g, dtype=torch.float64)
    if channels_last:  # row-major tokens seen as a map, as the static WeightFormer block has
        x = x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    weight = torch.randn(6, 1, 3, 3, generator=g, dtype=torch.float64)
    bias = torch.randn(6, generator=g, dtype=torch.float64)
    torch.testing.assert_close(
        depthwise_conv2d(x, weight, bias), F.conv2d(x, weight, bias, padding=1, groups=6))
