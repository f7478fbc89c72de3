"""The ops as PyTorch operators (``torch.ops.mmlinear.*``): schemas, fake impls and autograd
checked by ``torch.library.opcheck``, FLOP formulas equal to the references' counts, the
references while exporting, and the kernels inside a ``torch.compile``-d graph."""
import io
import warnings

import pytest
import torch
from op_fixtures import ext, kernels_run  # noqa: F401 (pytest fixtures)
from torch._inductor.utils import run_and_get_code
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.flop_counter import FlopCounterMode

from mmlinear.ops import (dynamic_dwconv2d, dynamic_dwconv2d_reference, linear_infsa_key_pool,
                          linear_infsa_key_pool_reference, linear_infsa_query_sums,
                          linear_infsa_query_sums_reference, pure_infsa, pure_infsa_reference)
from mmlinear.utils import ext_loader

SCHEMAS = {
    'linear_infsa_query_sums':
    'mmlinear::linear_infsa_query_sums(Tensor q, Tensor? key_padding_mask) -> '
    '(Tensor weighted_queries, Tensor energy_sum)',
    'linear_infsa_key_pool':
    'mmlinear::linear_infsa_key_pool(Tensor central_query, Tensor k, Tensor x, '
    'Tensor? key_padding_mask) -> (Tensor weighted_inputs, Tensor score_sum)',
    'pure_infsa':
    'mmlinear::pure_infsa(Tensor q, Tensor k, Tensor v, Tensor rho, '
    'Tensor? key_padding_mask, float eps) -> (Tensor out, Tensor fro_norm)',
    'dynamic_dwconv2d':
    'mmlinear::dynamic_dwconv2d(Tensor x, Tensor weight, Tensor? bias) -> '
    'Tensor',
}


def infsa_inputs(dtype=torch.float64, B=2, H=3, N=5, S=7, d=4, mask=True, seed=0):
    """q, k, v, rho (H,) and a mask as the wrappers hand them to the operators."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(B, H, n, d, generator=g, dtype=dtype).requires_grad_() for n in (N, S, S))
    rho = (torch.rand(H, generator=g, dtype=dtype) * 0.8 + 0.1).requires_grad_()
    key_padding_mask = None
    if mask:
        key_padding_mask = torch.zeros(B, S, dtype=torch.bool)
        key_padding_mask[0, S // 2:] = True
    return q, k, v, rho, key_padding_mask


def sums_inputs(dtype=torch.float64, B=2, H=3, n=7, d=4, C=5, mask=True, seed=0):
    """q and k as transposed (B, n, H, d) projections, x (B, n, C), a central query and a mask,
    as the wrappers hand them to the Linear-InfSA sum operators."""
    g = torch.Generator().manual_seed(seed)
    q, k = (
        torch.randn(B, n, H, d, generator=g, dtype=dtype).transpose(1, 2).requires_grad_()
        for _ in range(2))
    x = torch.randn(B, n, C, generator=g, dtype=dtype).requires_grad_()
    central = torch.randn(B, H, d, generator=g, dtype=dtype).requires_grad_()
    key_padding_mask = None
    if mask:
        key_padding_mask = torch.zeros(B, n, dtype=torch.bool)
        key_padding_mask[0, n // 2:] = True
    return q, k, x, central, key_padding_mask


def dwconv_inputs(dtype=torch.float64, B=2, C=3, H=6, W=5, ks=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()
        for shape in ((B, C, H, W), (B, C, ks, ks), (B, C)))


def test_schemas():
    for name, schema in SCHEMAS.items():
        assert str(getattr(torch.ops.mmlinear, name).default._schema) == schema


@pytest.mark.parametrize('mask', [False, True])
def test_opcheck_infsa(ext, mask):
    """Schema, fake impl (shapes, dtypes, strides, dynamic shapes) and the registered
    autograd against the kernel; float32 too, whose statistics are float32."""
    for dtype in (torch.float64, torch.float32):
        q, k, v, rho, key_padding_mask = infsa_inputs(dtype, mask=mask)
        torch.library.opcheck(torch.ops.mmlinear.pure_infsa, (q, k, v, rho, key_padding_mask, 1e-6))


@pytest.mark.parametrize('mask', [False, True])
def test_opcheck_linear_infsa_sums(ext, mask):
    """The same checks for both Linear-InfSA sums, on non-contiguous (transposed) heads."""
    for dtype in (torch.float64, torch.float32):
        q, k, x, central, key_padding_mask = sums_inputs(dtype, mask=mask)
        torch.library.opcheck(torch.ops.mmlinear.linear_infsa_query_sums, (q, key_padding_mask))
        torch.library.opcheck(torch.ops.mmlinear.linear_infsa_key_pool,
                              (central, k, x, key_padding_mask))


@pytest.mark.parametrize('bias', [False, True])
def test_opcheck_dynamic_dwconv2d(ext, bias):
    x, weight, b = dwconv_inputs()
    torch.library.opcheck(torch.ops.mmlinear.dynamic_dwconv2d, (x, weight, b if bias else None))


def test_opcheck_backward_operators(ext):
    q, k, x, central, mask = (t.detach() if t is not None else t for t in sums_inputs())
    weighted_queries, energy_sum = torch.ops.mmlinear.linear_infsa_query_sums(q, mask)
    torch.library.opcheck(
        torch.ops.mmlinear.linear_infsa_query_sums_backward,
        (torch.randn_like(weighted_queries), torch.randn_like(energy_sum), q, mask))
    weighted_inputs, score_sum = torch.ops.mmlinear.linear_infsa_key_pool(central, k, x, mask)
    torch.library.opcheck(
        torch.ops.mmlinear.linear_infsa_key_pool_backward,
        (torch.randn_like(weighted_inputs), torch.randn_like(score_sum), central, k, x, mask))
    q, k, v, rho, mask = (t.detach() if t is not None else t for t in infsa_inputs())
    out, fro_norm = torch.ops.mmlinear.pure_infsa(q, k, v, rho, mask, 1e-6)
    torch.library.opcheck(
        torch.ops.mmlinear.pure_infsa_backward,
        (torch.randn_like(out), q, k, v, rho, mask, fro_norm, torch.randn_like(fro_norm), 1e-6))
    x, weight, _ = (t.detach() for t in dwconv_inputs())
    torch.library.opcheck(torch.ops.mmlinear.dynamic_dwconv2d_backward,
                          (torch.randn_like(x), x, weight))


def test_operators_name_the_missing_kernel(monkeypatch):
    """Called directly where no kernel exists, an operator says so (the functions of
    mmlinear.ops take the reference there instead)."""
    monkeypatch.setenv(ext_loader.DISABLE_ENV, '1')
    ext_loader.load_ext.cache_clear()
    try:
        q, k, v, rho, _ = infsa_inputs()
        with pytest.raises(
                RuntimeError, match='torch.ops.mmlinear.pure_infsa has no kernel for cpu tensors'):
            torch.ops.mmlinear.pure_infsa(q, k, v, rho, None, 1e-6)
    finally:
        ext_loader.load_ext.cache_clear()


def count_flops(fn, *args):
    """Forward and backward FLOPs of ``fn(*args)`` on fake activations (the counter starts
    again at zero when it is entered), and the names of the counted forward operators."""
    counter = FlopCounterMode(display=False)
    with FakeTensorMode(allow_non_fake_inputs=True):
        with counter:
            out = fn(*args)
        forward = counter.get_total_flops()
        counted = {str(op) for op in counter.get_flop_counts()['Global']}
        with counter:
            out.sum().backward()
        backward = counter.get_total_flops()
    return forward, backward, counted


def test_pure_infsa_flops_equal_the_reference(ext):
    """Fake tensors take the operator (its fake impl); its FLOP formulas count what the counter
    counts on the reference, forward and backward (the backward adds the <dO, O> product,
    2 B H N d)."""
    inputs = infsa_inputs(torch.float32, N=6, S=9, d=8, mask=False)
    ran = kernels_run(lambda: count_flops(pure_infsa, *inputs))
    assert ran == set()  # fake tensors never reach a kernel
    (forward, backward, counted), (ref_forward, ref_backward,
                                   _) = (count_flops(pure_infsa, *inputs),
                                         count_flops(pure_infsa_reference, *inputs))
    assert counted == {'mmlinear.pure_infsa'}
    assert forward == ref_forward
    assert backward == ref_backward + 2 * 2 * 3 * 6 * 8


def summed(fn):
    """``fn`` with its outputs summed into one scalar, for count_flops."""
    return lambda *args: sum(t.sum() for t in fn(*args))


def test_linear_infsa_sums_flops_equal_the_references(ext):
    q, k, x, central, _ = sums_inputs(torch.float32, n=6, d=8, C=10, mask=False)
    for op, fn, reference, args in (
        ('linear_infsa_query_sums', linear_infsa_query_sums, linear_infsa_query_sums_reference,
         (q, )),
        ('linear_infsa_key_pool', linear_infsa_key_pool, linear_infsa_key_pool_reference, (central,
                                                                                           k, x)),
    ):
        assert kernels_run(lambda: count_flops(summed(fn), *args)) == set()
        forward, backward, counted = count_flops(summed(fn), *args)
        ref_forward, ref_backward, _ = count_flops(summed(reference), *args)
        assert counted == {f'mmlinear.{op}'}
        assert (forward, backward) == (ref_forward, ref_backward)
    assert count_flops(summed(linear_infsa_key_pool), central, k, x)[0] == 2 * 2 * 3 * 6 * (8 + 10)


def test_dwconv_flops(ext):
    """Forward as counted on the reference's grouped convolution; backward twice that (the
    counter's formula for a grouped convolution's backward ignores the groups, so the
    reference is not the yardstick there)."""
    x, weight, bias = dwconv_inputs(torch.float32, ks=5)
    forward, backward, counted = count_flops(dynamic_dwconv2d, x, weight, bias)
    assert counted == {'mmlinear.dynamic_dwconv2d'}
    assert forward == count_flops(dynamic_dwconv2d_reference, x, weight, bias)[0]
    assert forward == 2 * 2 * 3 * 6 * 5 * 5 * 5
    assert backward == 2 * forward


ALL_OPS = ('dynamic_dwconv2d', 'pure_infsa', 'linear_infsa_query_sums', 'linear_infsa_key_pool')


class AllOps(torch.nn.Module):
    """Each op once, on features shaped (B, C, H, W) with C = 2 heads x 4."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        weight = x.mean((2, 3))[..., None, None].expand(B, C, 3, 3)
        x = dynamic_dwconv2d(x, weight, x.mean((0, 2, 3)))
        tokens = x.flatten(2).reshape(B, 2, C // 2, H * W).transpose(2, 3)
        rho = torch.tensor([0.9, 0.5])
        out = pure_infsa(tokens, tokens, tokens, rho).transpose(2, 3).reshape(B, C, H, W)
        weighted_queries, energy_sum = linear_infsa_query_sums(tokens)
        central = weighted_queries / (energy_sum[..., None] + 1e-6)
        pooled, _ = linear_infsa_key_pool(central, tokens, x.flatten(2).transpose(1, 2))
        return out + pooled.mean(1)[..., None, None]


def test_references_run_while_exporting(ext):
    """The contract the exporters rely on: while exporting, the ops are their references."""
    x = torch.randn(2, 8, 5, 6)
    assert kernels_run(lambda: AllOps()(x)) == set(ALL_OPS)
    assert not ext_loader.exporting()
    graph = torch.export.export(AllOps(), (x, )).graph
    targets = {str(node.target) for node in graph.nodes if node.op == 'call_function'}
    assert not [t for t in targets if 'mmlinear' in t], targets
    assert 'aten.conv2d.default' in targets  # the reference's grouped convolution
    pytest.importorskip('onnx')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the TorchScript exporter's deprecation notice
        torch.onnx.export(AllOps(), (x, ), io.BytesIO(), dynamo=False)


def test_compiled_graph_runs_the_kernels(ext):
    """fullgraph compilation with inductor: the generated forward and backward code call the
    operators, the compiled call runs them, and it matches eager (output and input
    gradient)."""
    model = AllOps()
    x = torch.randn(2, 8, 5, 6, dtype=torch.float64, requires_grad=True)
    expected = model(x)
    (expected_grad, ) = torch.autograd.grad(expected.square().sum(), x)
    compiled = torch.compile(model, fullgraph=True)

    def forward_backward():
        out = compiled(x)
        return out, torch.autograd.grad(out.square().sum(), x)[0]

    (out, grad), (forward_code, backward_code) = run_and_get_code(forward_backward)
    for name in ALL_OPS:
        assert f'torch.ops.mmlinear.{name}.default' in forward_code
        assert f'torch.ops.mmlinear.{name}_backward.default' in backward_code
    assert kernels_run(forward_backward) == {
        name + suffix
        for name in ALL_OPS
        for suffix in ('', '_backward')
    }
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(grad, expected_grad, atol=1e-10, rtol=1e-10)
