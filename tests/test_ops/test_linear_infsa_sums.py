"""Linear-InfSA's two sum ops (query sums, key pooling) against their PyTorch references.

Each case runs on every available device; on the reference path (``MMLINEAR_WITH_OPS=0``
builds or ``MMLINEAR_DISABLE_EXT=1``) only the tests that need the extension skip.
"""
import pytest
import torch
from op_fixtures import device, ext, kernels_run  # noqa: F401 (pytest fixtures)

from mmlinear.ops import (linear_infsa_key_pool, linear_infsa_key_pool_reference,
                          linear_infsa_key_weights, linear_infsa_query_sums,
                          linear_infsa_query_sums_reference)

MASKS = [None, 'some', 'all']


def make_mask(B, n, kind, device):
    """None, 'some' (the second half of sample 0 padded) or 'all' (sample B-1 all padded)."""
    if kind is None:
        return None
    mask = torch.zeros(B, n, dtype=torch.bool)
    mask[0, n // 2:] = True
    if kind == 'all':
        mask[-1] = True
    return mask.to(device)


def make_inputs(device,
                dtype=torch.float64,
                B=2,
                H=3,
                n=10,
                d=8,
                C=12,
                seed=0,
                mask=None,
                requires_grad=True):
    """q and k as the attention layer has them (a (B, n, H, d) projection viewed as
    (B, H, n, d), not contiguous), the inputs x (B, n, C), a central query and a mask."""
    g = torch.Generator().manual_seed(seed)

    def heads():
        t = torch.randn(B, n, H, d, generator=g, dtype=torch.float64).transpose(1, 2)
        return t.to(device=device, dtype=dtype).requires_grad_(requires_grad)

    q, k = heads(), heads()
    x = torch.randn(B, n, C, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
    acc = torch.promote_types(dtype, torch.float32)
    central = torch.randn(B, H, d, generator=g, dtype=torch.float64).to(device=device, dtype=acc)
    return (q, k, x.requires_grad_(requires_grad), central.requires_grad_(requires_grad),
            make_mask(B, n, mask, device))


def outputs_and_grads(outputs, inputs, seed=1):
    """The outputs and the gradients of a random linear function of them w.r.t. ``inputs``."""
    g = torch.Generator().manual_seed(seed)
    loss = sum(
        (o * torch.randn(o.shape, generator=g, dtype=torch.float64).to(o)).sum() for o in outputs)
    return (*outputs, *torch.autograd.grad(loss, inputs))


def query_sums_case(fn, q, mask):
    return outputs_and_grads(fn(q, mask), (q, ))


def key_pool_case(fn, central, k, x, mask):
    return outputs_and_grads(fn(central, k, x, mask), (central, k, x))


def assert_all_close(got, expected, **tol):
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, **tol)


@pytest.mark.parametrize('mask', MASKS)
def test_query_sums_match_reference_in_float64(device, mask):
    q, _, _, _, padding_mask = make_inputs(device, mask=mask)
    assert not q.is_contiguous()
    assert_all_close(
        query_sums_case(linear_infsa_query_sums, q, padding_mask),
        query_sums_case(linear_infsa_query_sums_reference, q, padding_mask),
        atol=1e-12,
        rtol=1e-12)


@pytest.mark.parametrize('mask', MASKS)
def test_key_pool_matches_reference_in_float64(device, mask):
    _, k, x, central, padding_mask = make_inputs(device, mask=mask)
    assert_all_close(
        key_pool_case(linear_infsa_key_pool, central, k, x, padding_mask),
        key_pool_case(linear_infsa_key_pool_reference, central, k, x, padding_mask),
        atol=1e-12,
        rtol=1e-12)


def test_float32_over_many_chunks(device):
    """3000 tokens: several chunks of the kernels' partial sums (and tiles on CUDA)."""
    q, k, x, central, mask = make_inputs(
        device, dtype=torch.float32, B=2, H=4, n=3000, d=32, C=48, mask='some')
    assert_all_close(
        query_sums_case(linear_infsa_query_sums, q, mask),
        query_sums_case(linear_infsa_query_sums_reference, q, mask),
        atol=1e-4,
        rtol=1e-4)
    assert_all_close(
        key_pool_case(linear_infsa_key_pool, central, k, x, mask),
        key_pool_case(linear_infsa_key_pool_reference, central, k, x, mask),
        atol=1e-4,
        rtol=1e-4)


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_types_match_the_float64_reference(device, dtype):
    if device.type == 'cpu' and dtype == torch.float16:
        pytest.skip('float16 matmuls of the reference are slow or missing on CPU')
    q, k, x, central, mask = make_inputs(
        device, dtype=dtype, n=64, d=16, mask='some', requires_grad=False)
    for got, expected in [
        (linear_infsa_query_sums(q, mask), linear_infsa_query_sums_reference(q.double(), mask)),
        (linear_infsa_key_pool(central, k, x, mask),
         linear_infsa_key_pool_reference(central.double(), k.double(), x.double(), mask)),
    ]:
        for a, b in zip(got, expected):
            assert a.dtype == torch.float32  # the sums accumulate in float32
            # Half inputs hold 8 (bf16) or 11 (fp16) significant bits.
            tol = 2e-2 if dtype == torch.bfloat16 else 2e-3
            torch.testing.assert_close(a.double(), b, atol=tol, rtol=tol)


@pytest.mark.parametrize('mask', [None, 'some'])
def test_gradcheck(device, mask):
    q, k, x, central, padding_mask = make_inputs(device, B=2, H=2, n=5, d=4, C=3, mask=mask)
    assert torch.autograd.gradcheck(lambda t: linear_infsa_query_sums(t, padding_mask), (q, ))
    assert torch.autograd.gradcheck(lambda *t: linear_infsa_key_pool(*t, padding_mask),
                                    (central, k, x))


def test_bands_add_up_to_the_whole_sequence(device):
    """The streamed backbones add the sums of bands of tokens: the same sums as one pass."""
    q, k, x, central, mask = make_inputs(device, n=700, mask='some', requires_grad=False)
    whole_q = linear_infsa_query_sums(q, mask)
    whole_k = linear_infsa_key_pool(central, k, x, mask)
    bands = [slice(0, 250), slice(250, 251), slice(251, 700)]
    parts_q = [linear_infsa_query_sums(q[:, :, s], mask[:, s]) for s in bands]
    parts_k = [linear_infsa_key_pool(central, k[:, :, s], x[:, s], mask[:, s]) for s in bands]
    for whole, parts in ((whole_q, parts_q), (whole_k, parts_k)):
        for i, total in enumerate(whole):
            torch.testing.assert_close(sum(p[i] for p in parts), total, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize('mask', MASKS)
def test_two_passes_pool_the_inputs_with_the_key_weights(device, mask):
    """central = the ratio of the query sums, then rho times the ratio of the key pooling is
    ``sum_j a_j x_j`` with the key weights a of the explicit formula."""
    q, k, x, _, padding_mask = make_inputs(device, mask=mask, requires_grad=False)
    rho, eps = torch.tensor([0.9, 0.5, 0.2], dtype=torch.float64, device=device), 1e-6
    weighted_queries, energy_sum = linear_infsa_query_sums(q, padding_mask)
    central = weighted_queries / (energy_sum[..., None] + eps)
    weighted_inputs, score_sum = linear_infsa_key_pool(central, k, x, padding_mask)
    pooled = rho[:, None] * weighted_inputs / (score_sum[..., None] + eps)
    key_weights = linear_infsa_key_weights(q, k, rho, padding_mask, eps)
    torch.testing.assert_close(pooled, torch.bmm(key_weights, x), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize('sizes', [dict(B=0), dict(n=0)])
def test_zero_size_inputs_give_zero_sums(device, sizes):
    q, k, x, central, _ = make_inputs(device, **sizes)
    B = q.shape[0]
    for got, shapes in ((linear_infsa_query_sums(q), [(B, 3, 8), (B, 3)]),
                        (linear_infsa_key_pool(central, k, x), [(B, 3, 12), (B, 3)])):
        assert [tuple(t.shape) for t in got] == shapes
        assert all((t == 0).all() for t in got)
    grads = torch.autograd.grad(
        sum(t.sum() for t in linear_infsa_key_pool(central, k, x)), (central, k, x))
    assert all((g == 0).all() for g in grads)


def test_non_positive_scores_pool_nothing(device):
    """Every score <= 0: the sums are exactly zero and the gradients are zero, not NaN."""
    _, k, x, central, _ = make_inputs(device, requires_grad=False)
    central, k = central.abs() + 0.1, -(k.abs() + 0.1)
    inputs = [t.clone().requires_grad_() for t in (central, k, x)]
    got = key_pool_case(linear_infsa_key_pool, *inputs, None)
    assert all((t == 0).all() for t in got)
    assert_all_close(
        got, key_pool_case(linear_infsa_key_pool_reference, *inputs, None), atol=0, rtol=0)


def test_zero_queries_have_no_energy_and_no_gradient(device):
    q, _, _, _, _ = make_inputs(device, requires_grad=False)
    q = q.clone()
    q[:, :, :3] = 0
    q.requires_grad_()
    assert_all_close(
        query_sums_case(linear_infsa_query_sums, q, None),
        query_sums_case(linear_infsa_query_sums_reference, q, None),
        atol=1e-12,
        rtol=1e-12)


def test_results_do_not_depend_on_the_thread_count(ext):
    """The kernels' partial sums follow the sequence length, not the threads: bit for bit."""
    q, k, x, central, mask = make_inputs(
        'cpu', dtype=torch.float32, n=5000, d=32, C=64, mask='some')
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 3):
            torch.set_num_threads(count)
            results.append(
                query_sums_case(linear_infsa_query_sums, q, mask) +
                key_pool_case(linear_infsa_key_pool, central, k, x, mask))
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(*results, strict=True))


def test_clear_errors_for_mismatched_inputs():
    q, k, x, central, _ = make_inputs('cpu', requires_grad=False)
    with pytest.raises(ValueError, match=r'q must be a floating \(B, H, n, d\) tensor'):
        linear_infsa_query_sums(q[0])
    with pytest.raises(ValueError, match=r'bool tensor of shape \(B, n\) = \(2, 10\)'):
        linear_infsa_query_sums(q, torch.zeros(2, 9, dtype=torch.bool))
    with pytest.raises(ValueError, match=r'central_query \(B, H, d\) = \(2, 3, 8\)'):
        linear_infsa_key_pool(central[..., :4], k, x)
    with pytest.raises(ValueError, match=r'x \(B, n, C\) with \(B, n\) = \(2, 10\)'):
        linear_infsa_key_pool(central, k, x[:, :9])
    with pytest.raises(ValueError, match='one device'):
        linear_infsa_key_pool(central, k, x.to('meta'))


def test_kernel_path_is_taken(device, ext):
    q, k, x, central, mask = make_inputs(device, mask='some')

    def both_passes():
        loss = sum(t.sum() for t in linear_infsa_query_sums(q, mask))
        loss = loss + sum(t.sum() for t in linear_infsa_key_pool(central, k, x, mask))
        loss.backward()

    assert kernels_run(both_passes) == {
        'linear_infsa_query_sums', 'linear_infsa_query_sums_backward', 'linear_infsa_key_pool',
        'linear_infsa_key_pool_backward'
    }


@pytest.mark.parametrize('op', [linear_infsa_query_sums, linear_infsa_query_sums_reference])
def test_the_retired_mask_keyword_of_the_query_sums_warns_and_gives_the_same_sums(op):
    q = torch.randn(2, 2, 6, 4, dtype=torch.float64)
    mask = make_mask(2, 6, 'some', 'cpu')
    with pytest.warns(FutureWarning, match="'padding_mask' is deprecated .* 'key_padding_mask'"):
        old = op(q, padding_mask=mask)
    for got, expected in zip(old, op(q, key_padding_mask=mask)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize('op', [linear_infsa_key_pool, linear_infsa_key_pool_reference])
def test_the_retired_mask_keyword_of_the_key_pool_warns_and_gives_the_same_sums(op):
    central_query = torch.randn(2, 2, 4, dtype=torch.float64)
    k, x = torch.randn(2, 2, 6, 4, dtype=torch.float64), torch.randn(2, 6, 5, dtype=torch.float64)
    mask = make_mask(2, 6, 'some', 'cpu')
    with pytest.warns(FutureWarning, match="'padding_mask' is deprecated .* 'key_padding_mask'"):
        old = op(central_query, k, x, padding_mask=mask)
    for got, expected in zip(old, op(central_query, k, x, key_padding_mask=mask)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
