"""The CPU kernels' code paths that small inputs do not reach, against the references.

- every instruction-set variant (AVX512, AVX2, the x86-64 baseline), chosen at run time as ATen
  chooses its own and selected here with ``ATEN_CPU_CAPABILITY`` in a fresh process;
- Linear-InfSA's sum kernels over several chunks of tokens;
- Pure InfSA's tiles (several query and key blocks, masks across their borders) and its
  backward split into chunks of query blocks when there are fewer (sample, head) pairs than
  threads.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from op_fixtures import ext  # noqa: F401 (pytest fixture)

from mmlinear.ops import (linear_infsa_key_pool, linear_infsa_key_pool_reference,
                          linear_infsa_query_sums, linear_infsa_query_sums_reference, pure_infsa,
                          pure_infsa_reference)

# Tile sides of the CPU Pure InfSA kernel (pure_infsa.cpp): the sizes below cross them.
QUERY_BLOCK, KEY_BLOCK = 256, 512


def inputs(B, H, N, S, d, dtype=torch.float64, masked=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, n, d, generator=g, dtype=torch.float64) for n in (N, S, S))
    rho = torch.rand(H, generator=g, dtype=torch.float64) * 0.8 + 0.1
    mask = None
    if masked:
        # Padding that starts inside a key block (and, for self-attention, a query block).
        mask = torch.zeros(B, S, dtype=torch.bool)
        mask[0, S - S // 3:] = True
    tensors = [t.to(dtype).requires_grad_() for t in (q, k, v)]
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    return (*tensors, rho.to(acc).requires_grad_(), mask)


def outputs_and_grads(fn, q, k, v, rho, mask):
    out = fn(q, k, v, rho, mask)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out)
    return (out, *torch.autograd.grad(out, (q, k, v, rho), grad))


def assert_matches_reference(fn, reference, args, tol):
    for got, expected in zip(outputs_and_grads(fn, *args), outputs_and_grads(reference, *args)):
        torch.testing.assert_close(got, expected, atol=tol, rtol=tol)


def assert_sums_match_reference(dtype, tol, n=1500, d=24):
    """Both Linear-InfSA sums and their gradients over n tokens (several chunks)."""
    from test_linear_infsa_sums import assert_all_close, key_pool_case, make_inputs, query_sums_case
    q, k, x, central, mask = make_inputs('cpu', dtype=dtype, n=n, d=d, C=40, mask='some')
    assert_all_close(
        query_sums_case(linear_infsa_query_sums, q, mask),
        query_sums_case(linear_infsa_query_sums_reference, q, mask),
        atol=tol,
        rtol=tol)
    assert_all_close(
        key_pool_case(linear_infsa_key_pool, central, k, x, mask),
        key_pool_case(linear_infsa_key_pool_reference, central, k, x, mask),
        atol=tol,
        rtol=tol)


@pytest.mark.parametrize('d', [64, 24])
def test_linear_infsa_sums_over_chunks(ext, d):
    assert_sums_match_reference(torch.float64, 1e-10, d=d)


@pytest.mark.parametrize('cross', [False, True])
@pytest.mark.parametrize('threads', [1, 2])
def test_pure_infsa_tiles_and_chunks(ext, cross, threads):
    """B * H = 1 with two threads splits the backward into two chunks of query blocks."""
    N = 2 * QUERY_BLOCK + 37
    S = 2 * KEY_BLOCK + 11 if cross else N
    args = inputs(B=1, H=1, N=N, S=S, d=16)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert_matches_reference(pure_infsa, pure_infsa_reference, args, 1e-10)
    finally:
        torch.set_num_threads(previous)


# Run in a fresh process per capability: ATen reads ATEN_CPU_CAPABILITY once, at start-up.
VARIANT_CHECK = textwrap.dedent("""
    import sys
    import torch
    import mmlinear._ext as ext
    from mmlinear.ops import pure_infsa, pure_infsa_reference
    sys.path.insert(0, sys.argv[1])
    from test_cpu_kernel_variants import (assert_matches_reference, assert_sums_match_reference,
                                          inputs)
    print(ext.cpu_capability())
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
        for d in (64, 24):
            args = inputs(B=2, H=2, N=300, S=600, d=d, dtype=dtype)
            assert_matches_reference(pure_infsa, pure_infsa_reference, args, tol)
            assert_sums_match_reference(dtype, tol, d=d)
    print('ok')
""")


def supported_capabilities():
    """The capabilities this CPU can run: the baseline and those up to ATen's own choice."""
    ladder = ['DEFAULT', 'AVX2', 'AVX512']
    best = torch.backends.cpu.get_cpu_capability()
    return ladder[:ladder.index(best) + 1] if best in ladder else ['DEFAULT']


@pytest.mark.parametrize('capability', ['DEFAULT', 'AVX2', 'AVX512'])
def test_every_cpu_capability_matches_the_reference(ext, capability):
    if capability not in supported_capabilities():
        pytest.skip(f'this CPU runs at most {torch.backends.cpu.get_cpu_capability()}')
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability.lower())
    result = subprocess.run([sys.executable, '-c', VARIANT_CHECK,
                             os.path.dirname(__file__)],
                            env=env,
                            capture_output=True,
                            text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == [capability, 'ok']
