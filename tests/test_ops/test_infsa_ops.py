"""The fused Pure InfSA kernel against its PyTorch reference (the specification); Linear-InfSA's
sum ops are tested in test_linear_infsa_sums.py.

Each case runs on every available device; the same assertions hold on the reference path
(``MMLINEAR_WITH_OPS=0`` builds or ``MMLINEAR_DISABLE_EXT=1``), where only the tests that
need the extension skip.
"""
import pytest
import torch
from op_fixtures import device, ext, kernels_run  # noqa: F401 (pytest fixtures)

from mmlinear.ops import linear_infsa_key_weights, pure_infsa, pure_infsa_reference

OPS = {
    'pure': (pure_infsa, pure_infsa_reference),
}


def make_inputs(device,
                dtype=torch.float64,
                B=2,
                H=3,
                N=10,
                S=None,
                d=8,
                seed=0,
                per_head=True,
                mask=None,
                requires_grad=True):
    """Random q, k, v, rho and a mask: None, 'keys' (last keys of sample 0 padded) or 'all'
    (sample 1 entirely padded)."""
    g = torch.Generator().manual_seed(seed)
    S = N if S is None else S
    q, k, v = (torch.randn(B, H, n, d, generator=g, dtype=torch.float64) for n in (N, S, S))
    rho = torch.rand(H if per_head else 1, generator=g, dtype=torch.float64) * 0.8 + 0.1
    key_padding_mask = None
    if mask is not None:
        key_padding_mask = torch.zeros(B, S, dtype=torch.bool)
        key_padding_mask[0, S // 2:] = True
        if mask == 'all':
            key_padding_mask[-1] = True
        key_padding_mask = key_padding_mask.to(device)
    tensors = [t.to(device=device, dtype=dtype).requires_grad_(requires_grad) for t in (q, k, v)]
    rho = rho.to(device=device, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    return (*tensors, rho.requires_grad_(requires_grad), key_padding_mask)


def outputs_and_grads(fn, q, k, v, rho, key_padding_mask, grad_seed=1):
    out = fn(q, k, v, rho, key_padding_mask)
    grad = torch.randn(
        out.shape, generator=torch.Generator().manual_seed(grad_seed), dtype=torch.float64).to(out)
    grads = torch.autograd.grad(out, (q, k, v, rho), grad, allow_unused=True)
    return (out, *grads)


@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('mask', [None, 'keys', 'all'])
@pytest.mark.parametrize('cross', [False, True])
@pytest.mark.parametrize('per_head', [True, False])
def test_matches_reference_in_float64(device, op, mask, cross, per_head):
    fn, reference = OPS[op]
    inputs = make_inputs(device, N=9, S=13 if cross else None, mask=mask, per_head=per_head)
    for got, expected in zip(outputs_and_grads(fn, *inputs), outputs_and_grads(reference, *inputs)):
        torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize('op', OPS)
def test_matches_reference_in_float32(device, op):
    fn, reference = OPS[op]
    inputs = make_inputs(device, dtype=torch.float32, B=2, H=4, N=300, d=32, mask='keys')
    for got, expected in zip(outputs_and_grads(fn, *inputs), outputs_and_grads(reference, *inputs)):
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_types_match_the_float64_reference(device, op, dtype):
    if device.type == 'cpu' and dtype == torch.float16:
        pytest.skip('float16 matmuls of the reference are slow or missing on CPU')
    fn, reference = OPS[op]
    inputs = make_inputs(device, dtype=dtype, N=64, d=16, mask='keys', requires_grad=False)
    out = fn(*inputs)
    assert out.dtype == dtype
    q, k, v, rho, mask = inputs
    expected = reference(q.double(), k.double(), v.double(), rho.double(), mask)
    # Half outputs hold 8 (bf16) or 11 (fp16) significant bits; the sums inside are float32.
    tol = 2e-2 if dtype == torch.bfloat16 else 2e-3
    torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)


@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('mask', [None, 'keys'])
def test_gradcheck(device, op, mask):
    fn, _ = OPS[op]
    q, k, v, rho, key_padding_mask = make_inputs(device, B=2, H=2, N=5, S=6, d=4, mask=mask)
    assert torch.autograd.gradcheck(
        lambda *t: fn(*t, key_padding_mask), (q, k, v, rho), eps=1e-6, atol=1e-7)
    # Self-attention also masks the queries.
    q, k, v, rho, key_padding_mask = make_inputs(device, B=2, H=2, N=5, d=4, mask=mask, seed=3)
    assert torch.autograd.gradcheck(
        lambda *t: fn(*t, key_padding_mask), (q, k, v, rho), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize('op', OPS)
def test_non_contiguous_inputs(device, op):
    fn, reference = OPS[op]
    g = torch.Generator().manual_seed(0)
    # (B, N, H, d) projections viewed as (B, H, N, d), as the attention layer does.
    q, k, v = (
        torch.randn(2, 7, 3, 8, generator=g, dtype=torch.float64).to(device).transpose(1, 2)
        for _ in range(3))
    rho = torch.tensor([0.9, 0.5, 0.2], dtype=torch.float64, device=device)
    assert not q.is_contiguous()
    torch.testing.assert_close(fn(q, k, v, rho), reference(q, k, v, rho), atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('sizes', [dict(B=0), dict(N=0), dict(S=0), dict(N=0, S=0)])
def test_zero_size_inputs(device, op, sizes):
    """Empty batches or sequences give empty outputs; no keys give zeros (nothing to pool)."""
    fn, reference = OPS[op]
    inputs = make_inputs(device, **{'B': 2, 'N': 4, 'S': 5, **sizes})
    got, expected = outputs_and_grads(fn, *inputs), outputs_and_grads(reference, *inputs)
    assert got[0].shape == inputs[0].shape
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    if sizes.get('S') == 0:
        assert (got[0] == 0).all()


@pytest.mark.parametrize('op', OPS)
def test_all_scores_non_positive(device, op):
    """q > 0 and k < 0 elementwise: every score is <= 0, so the output is exactly zero and only
    v and rho could receive gradient (here zero as well), with no NaN from 0 / 0."""
    fn, reference = OPS[op]
    q, k, v, rho, _ = make_inputs(device, N=6, d=4, requires_grad=False)
    q, k = q.abs() + 0.1, -(k.abs() + 0.1)
    inputs = [t.clone().requires_grad_() for t in (q, k, v, rho)]
    got = outputs_and_grads(fn, *inputs, None)
    expected = outputs_and_grads(reference, *inputs, None)
    assert (got[0] == 0).all()
    for a, b in zip(got, expected):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


@pytest.mark.parametrize('op', OPS)
def test_clear_errors_for_mismatched_inputs(op):
    fn, _ = OPS[op]
    q, k, v, rho, _ = make_inputs('cpu', requires_grad=False)
    with pytest.raises(ValueError, match=r'expected q \(B, H, N, d\), k \(B, H, S, d\)'):
        fn(q, k[..., :4], v, rho)
    with pytest.raises(ValueError, match='must be 4-D'):
        fn(q[0], k, v, rho)
    with pytest.raises(ValueError, match=r'rho must hold 1 value or one per head \(3\)'):
        fn(q, k, v, rho[:2])
    with pytest.raises(ValueError, match='share one floating dtype'):
        fn(q, k.float(), v, rho)
    with pytest.raises(ValueError, match='one device'):
        fn(q, k.to('meta'), v, rho)
    with pytest.raises(ValueError, match=r'bool tensor of shape \(B, S\) = \(2, 10\)'):
        fn(q, k, v, rho, torch.zeros(2, 9, dtype=torch.bool))


@pytest.mark.parametrize('op', OPS)
def test_kernel_path_is_taken(device, op, ext):
    fn, _ = OPS[op]
    q, k, v, rho, mask = make_inputs(device, mask='keys')
    ran = kernels_run(lambda: fn(q, k, v, rho, mask).sum().backward())
    assert ran == {f'{op}_infsa', f'{op}_infsa_backward'}


def linear_infsa_formula(q, k, v, rho):
    """Linear-InfSA per token, written out: the key-weighted value broadcast to every query."""
    pooled = torch.einsum('bhs,bhsd->bhd', linear_infsa_key_weights(q, k, rho), v)
    return pooled[:, :, None].expand_as(q)


def test_attention_layer_runs_through_the_kernels(ext):
    """InfSAAttention equals the formulas, output and rho gradient: Pure InfSA runs through
    its kernel, Linear-InfSA through its factorised path (the two sum kernels, projections
    once per sample)."""
    pytest.importorskip('mmengine', reason='the layers need mmengine; the ops alone do not')
    from mmlinear.models.layers import InfSAAttention
    torch.manual_seed(0)
    x = torch.randn(2, 12, 16, dtype=torch.float64)
    expected_kernels = {
        'linear': {'linear_infsa_query_sums', 'linear_infsa_key_pool'},
        'pure': {'pure_infsa'}
    }
    for attn_type, reference in (('linear', linear_infsa_formula), ('pure', pure_infsa_reference)):
        layer = InfSAAttention(16, 4, attn_type=attn_type).double()
        ran = kernels_run(lambda: layer(x))
        assert ran == expected_kernels[attn_type]
        out = layer(x)
        q = layer._split_heads(layer.q_proj(x))
        k = layer._split_heads(layer.k_proj(x))
        v = layer._split_heads(layer.v_proj(x))
        expected = layer.out_proj(reference(q, k, v, layer.rho).transpose(1, 2).reshape(2, 12, 16))
        torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)
        (grad_kernel, ) = torch.autograd.grad(out.sum(), layer.rho_logit)
        (grad_reference, ) = torch.autograd.grad(expected.sum(), layer.rho_logit)
        assert grad_kernel.abs().min() > 0
        torch.testing.assert_close(grad_kernel, grad_reference, atol=1e-10, rtol=1e-10)
