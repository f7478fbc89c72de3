"""benchmark_ops.py: the memory-traffic floor it times, and its command line end to end.

Nothing here depends on timings: only what is measured and reported, never how fast.
"""
import json

import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main


def test_traffic_floor_has_the_op_signature_and_gradient_shapes():
    tool = load_tool('benchmark_ops')
    q, k, v = (torch.randn(2, 3, 5, 4, requires_grad=True) for _ in range(3))
    rho = torch.rand(3, requires_grad=True)
    out = tool.linear_infsa_traffic_floor(q, k, v, rho)
    assert out.shape == q.shape
    out.backward(torch.randn_like(out))
    # The backward writes one fresh tensor per input: the clones of q, k and v.
    for t in (q, k, v):
        torch.testing.assert_close(t.grad, t.detach())
    assert rho.grad.shape == rho.shape


def test_cli_times_kernel_reference_and_floor(tmp_path):
    pytest.importorskip('matplotlib')
    tool = load_tool('benchmark_ops')
    result = run_tool_main(tool, '--ops', 'linear_infsa', 'pure_infsa', '--sizes', '64',
                           '--repeats', '1', '--warmup', '0', '--out', str(tmp_path))
    assert result.returncode == 0, result.stderr
    with open(tmp_path / 'benchmark_ops.json') as f:
        rows = {row['op']: row for row in json.load(f)['rows']}
    assert set(rows['linear_infsa']) >= {'kernel', 'reference', 'floor'}
    assert 'floor' not in rows['pure_infsa']
    for row in rows.values():
        for impl in ('kernel', 'reference', 'floor'):
            if impl in row:
                assert row[impl]['fwd_s'] > 0 and row[impl]['fwd_bwd_s'] > 0, row[impl]
    assert 'memory-traffic floor' in result.stdout
    assert (tmp_path / 'benchmark_ops.png').is_file()
