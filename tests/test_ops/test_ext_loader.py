"""Loading of mmlinear._ext: the reference fallback, its one-time warning, the runtime switch,
and the device registry's errors."""
import os
import subprocess
import sys
import types
import warnings

import pytest
import torch
from op_fixtures import ext, kernels_run  # noqa: F401 (pytest fixtures)

from mmlinear.ops import linear_infsa_query_sums, pure_infsa, pure_infsa_reference
from mmlinear.utils import ext_loader


@pytest.fixture
def fresh_loader():
    """Forget the cached extension before and after the test."""
    ext_loader.load_ext.cache_clear()
    yield
    ext_loader.load_ext.cache_clear()


def qkv(dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 3, 6, 4, generator=g, dtype=dtype) for _ in range(3)]


def test_missing_extension_falls_back_with_one_warning(monkeypatch, fresh_loader):
    # None in sys.modules makes `import mmlinear._ext` raise ImportError, as when it is not built.
    monkeypatch.setitem(sys.modules, 'mmlinear._ext', None)
    q, k, v = qkv()
    rho = torch.tensor(0.9, dtype=torch.float64)
    with pytest.warns(UserWarning, match='falls back to the PyTorch references'):
        out = pure_infsa(q, k, v, rho)
    torch.testing.assert_close(out, pure_infsa_reference(q, k, v, rho), atol=0, rtol=0)
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # a second warning would fail here
        linear_infsa_query_sums(q)
        pure_infsa(q, k, v, rho)


def test_stale_extension_is_not_used(monkeypatch, fresh_loader):
    monkeypatch.setitem(sys.modules, 'mmlinear._ext', types.ModuleType('mmlinear._ext'))
    with pytest.warns(UserWarning, match='it is stale'):
        assert ext_loader.load_ext() is None


def test_runtime_switch_disables_the_extension_silently(monkeypatch, fresh_loader):
    monkeypatch.setenv(ext_loader.DISABLE_ENV, '1')
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert ext_loader.load_ext() is None
        q, k, v = (t.requires_grad_() for t in qkv())
        rho = torch.tensor(0.5, dtype=torch.float64)
        assert kernels_run(lambda: pure_infsa(q, k, v, rho).sum().backward()) == set()
        assert kernels_run(lambda: linear_infsa_query_sums(q)[0].sum().backward()) == set()


def test_runtime_switch_in_a_fresh_process(repo_root):
    code = ('import warnings; warnings.simplefilter("error"); import torch; '
            'from mmlinear.utils.ext_loader import load_ext; from mmlinear.ops import pure_infsa; '
            'q = torch.randn(1, 2, 5, 4); pure_infsa(q, q, q, torch.tensor(0.5)); '
            'print(load_ext() is None)')
    env = {**os.environ, ext_loader.DISABLE_ENV: '1', 'PYTHONPATH': repo_root}
    result = subprocess.run([sys.executable, '-c', code],
                            env=env,
                            capture_output=True,
                            text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'True'


def test_half_types_on_cpu_run_the_kernel_in_float32(ext):
    q, k, v = qkv(torch.bfloat16)
    rho = torch.tensor(0.9)
    out = pure_infsa(q, k, v, rho)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, pure_infsa_reference(q, k, v, rho), atol=1e-2, rtol=1e-2)
    sums = kernels_run(lambda: linear_infsa_query_sums(q))
    assert sums == {'linear_infsa_query_sums'}


def test_device_registry_errors(ext):
    """The C++ dispatch names the op and the device; no silent fallback at that level."""
    q, k, v = (t.float() for t in qkv())
    rho = torch.ones(3)
    meta = [t.to('meta') for t in (q, k, v, rho)]
    built = 'CPU and CUDA kernels' if ext.with_cuda() else 'CPU kernels only'
    with pytest.raises(
            RuntimeError,
            match='linear_infsa_query_sums_impl: implementation for '
            rf'device META not found \(this build of mmlinear._ext has {built}\)'):
        ext.linear_infsa_query_sums_forward(meta[0], None)
    with pytest.raises(RuntimeError, match='pure_infsa_forward_impl: inconsistent devices'):
        ext.pure_infsa_forward(q, meta[1], v, rho, None, 1e-6)
    assert ext.with_cuda() in (True, False)
