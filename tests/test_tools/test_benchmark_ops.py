"""benchmark_ops.py: the memory-traffic floor it times, and its command line end to end.

Nothing here depends on timings: only what is measured and reported, never how fast.
"""
import json

import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main


def test_traffic_floor_has_the_op_signature_and_gradient_shapes():
    tool = load_tool('benchmark_ops')
    q, k = (torch.randn(2, 3, 5, 4, requires_grad=True) for _ in range(2))
    x = torch.randn(2, 5, 12, requires_grad=True)
    rho = torch.rand(3, requires_grad=True)
    out = tool.linear_infsa_traffic_floor(q, k, x, rho)
    assert out.shape == tool.linear_infsa_sums(q, k, x, rho).shape == (2, 3, 12)
    out.backward(torch.randn_like(out))
    # The backward writes one fresh tensor per input: the clones of q, k and x.
    for t in (q, k, x):
        torch.testing.assert_close(t.grad, t.detach())
    assert rho.grad.shape == rho.shape


def test_linear_infsa_sums_pool_the_inputs_with_the_key_weights():
    from mmlinear.ops import linear_infsa_key_weights
    tool = load_tool('benchmark_ops')
    q, k = (torch.randn(2, 3, 7, 4, dtype=torch.float64) for _ in range(2))
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    rho = torch.tensor([0.9, 0.5, 0.2], dtype=torch.float64)
    expected = torch.bmm(linear_infsa_key_weights(q, k, rho), x)
    for reference in (False, True):
        torch.testing.assert_close(tool.linear_infsa_sums(q, k, x, rho, reference), expected)


def test_cli_times_kernel_reference_and_floor(tmp_path):
    pytest.importorskip('matplotlib')
    tool = load_tool('benchmark_ops')
    # One op with a traffic floor: its three workers (kernel, reference, floor) cover every
    # kind of row the tool writes.
    result = run_tool_main(tool, '--ops', 'linear_infsa_sums', '--sizes', '64', '--repeats', '1',
                           '--warmup', '0', '--out', str(tmp_path))
    assert result.returncode == 0, result.stderr
    with open(tmp_path / 'benchmark_ops.json') as f:
        (row, ) = json.load(f)['rows']
    assert row['op'] == 'linear_infsa_sums'
    for impl in ('kernel', 'reference', 'floor'):
        assert row[impl]['fwd_s'] > 0 and row[impl]['fwd_bwd_s'] > 0, row[impl]
    assert 'memory-traffic floor' in result.stdout
    assert (tmp_path / 'benchmark_ops.png').is_file()


def test_module_cases_run_without_the_extension_as_their_reference(tmp_path):
    pytest.importorskip('mmengine')
    tool = load_tool('benchmark_ops')
    result = run_tool_main(tool, '--ops', 'infsa_attention_linear', '--sizes', '8', '--repeats',
                           '1', '--warmup', '0', '--out', str(tmp_path))
    assert result.returncode == 0, result.stderr
    with open(tmp_path / 'benchmark_ops.json') as f:
        (row, ) = json.load(f)['rows']
    assert row['reference']['kernels'] == []
    from mmlinear.utils.ext_loader import load_ext
    if load_ext() is not None:
        assert row['kernel']['kernels'] == [
            'linear_infsa_key_pool', 'linear_infsa_key_pool_backward', 'linear_infsa_query_sums',
            'linear_infsa_query_sums_backward'
        ]


def test_a_failed_measurement_fails_the_run(tmp_path, monkeypatch):
    """A worker that fails (as every one did on a bare GPU image when the timing loop needed
    mmengine) exits non-zero with the case named, after writing what was measured."""
    pytest.importorskip('matplotlib')
    tool = load_tool('benchmark_ops')
    monkeypatch.setattr(tool, 'run_case', lambda case: {'error': 'ModuleNotFoundError: x'})
    result = run_tool_main(tool, '--ops', 'dynamic_dwconv2d', '--sizes', '16', '--repeats', '1',
                           '--warmup', '0', '--out', str(tmp_path))
    assert result.returncode == 1
    assert '2 of 2 measurements failed' in result.stderr
    assert 'dynamic_dwconv2d N=16 kernel: ModuleNotFoundError: x' in result.stderr
    assert (tmp_path / 'benchmark_ops.json').is_file()
