import csv
import json
import math
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch
from analysis_tools_loader import TOOLS_DIR, load_tool

benchmark = load_tool('benchmark')
SCRIPT = osp.join(TOOLS_DIR, 'benchmark.py')


def test_fit_exponent_recovers_power_laws_over_the_largest_points():
    tokens = [196, 1024, 4096, 16384]
    assert benchmark.fit_exponent(tokens, [3 * n for n in tokens])[0] == pytest.approx(1.0)
    assert benchmark.fit_exponent(tokens, [5e-3 * n**2 for n in tokens])[0] == \
        pytest.approx(2.0)
    # Linear plus quadratic cost: the slope climbs towards 2 as the largest points are used.
    mixed = [1e4 * n + n**2 for n in tokens]
    slope_all, used_all = benchmark.fit_exponent(tokens, mixed, last=4)
    slope_top, used_top = benchmark.fit_exponent(tokens, mixed, last=2)
    assert used_all == tokens and used_top == tokens[-2:]
    assert 1 < slope_all < slope_top < 2
    # Failed cases (None) are left out; one point cannot give a slope.
    assert math.isnan(benchmark.fit_exponent([196, 1024], [1.0, None])[0])
    with pytest.raises(ValueError, match='last must be >= 2'):
        benchmark.fit_exponent(tokens, mixed, last=1)
    assert benchmark.format_exponent(float('nan')) == 'n/a (one point)'
    assert benchmark.format_exponent(1.004) == '1.00'


def test_time_extrapolation_and_run_planning():
    assert benchmark.estimate_seconds([], 1000) is None
    # One point: quadratic (the worst case of the baselines).
    assert benchmark.estimate_seconds([(100, 1.0)], 400) == pytest.approx(16.0)
    # Two points: their local slope (here 1), clamped to [1, 2.5].
    assert benchmark.estimate_seconds([(100, 1.0), (400, 4.0)], 1600) == pytest.approx(16.0)
    assert benchmark.estimate_seconds([(100, 1.0), (200, 1.0)], 400) == pytest.approx(2.0)
    assert benchmark.estimate_seconds([(100, 1.0), (200, 100.0)], 400) == \
        pytest.approx(100 * 2**2.5)
    # One point and the model's FLOP ratio: the ratio wins.
    assert benchmark.estimate_seconds([(100, 2.0)], 400, flop_ratio=3.0) == pytest.approx(6.)
    ratio = benchmark.FlopRatio('infvit-test-linear')(256, 128)
    assert 3 < ratio < 4  # affine in N: 4x the tokens, a bit less than 4x the FLOPs
    assert benchmark.plan_runs(None, 10, 1, 3) == (1, 3)
    assert benchmark.plan_runs(2.0, 10, 1, 3) == (1, 3)   # 8 s fit in 10 s
    assert benchmark.plan_runs(4.0, 10, 1, 3) == (1, 1)   # two runs fit: warm-up + one
    assert benchmark.plan_runs(8.0, 10, 1, 3) == (0, 1)   # one run: warm-up dropped first
    assert benchmark.num_tokens(224) == 196 and benchmark.num_tokens((230, 100)) == 15 * 7


def test_run_case_times_forward_and_backward():
    case = dict(model='infvit-test-linear', resolution=(48, 80), batch=2, dtype='bf16',
                mode='train', device='cpu', warmup=1, repeats=2,
                threads=torch.get_num_threads())
    result = benchmark.run_case(case)
    assert result['status'] == 'ok'
    assert len(result['times_ms']) == 2 and all(t > 0 for t in result['times_ms'])
    assert min(result['times_ms']) <= result['median_ms'] <= max(result['times_ms'])
    assert result['peak_mem_mb'] > 0
    assert result['params'] > 0


def test_cli_records_oom_skips_and_quadratic_memory(tmp_path):
    """Pure InfSA's reference op (an N x N score matrix; the compiled kernel is switched off) in
    fresh processes: the memory grows about as N^2, a case over the memory cap is an OOM (not a
    crash)."""
    out = tmp_path / 'bench'
    subprocess.run([
        sys.executable, SCRIPT, '--models', 'infvit-test-pure', '--resolutions', '512', '1024',
        '2048', '--repeats', '1', '--warmup', '0', '--threads', '1',
        '--mem-limit-gb', '2.5', '--fit-last', '2', '--out', str(out)
    ], check=True, capture_output=True, text=True, env=dict(os.environ, MMLINEAR_DISABLE_EXT='1'))
    with open(out / 'results.csv') as f:
        rows = list(csv.DictReader(f))
    assert [r['resolution'] for r in rows] == ['512', '1024', '2048']
    assert [r['tokens'] for r in rows] == ['1024', '4096', '16384']
    # 2048 px: 2 heads x 16385^2 float32 scores (2.1 GB) cannot fit in the 2.5 GB data cap.
    assert [r['status'] for r in rows] == ['ok', 'ok', 'OOM']
    assert "can't allocate memory" in rows[2]['note']
    small, large = (float(r['peak_mem_mb']) for r in rows[:2])
    # 4x the tokens: memory a + b * N grows at most 4x, the N x N scores make it more.
    assert large > 5 * small
    with open(out / 'results.json') as f:
        results = json.load(f)
    (fit, ) = results['fits']
    assert fit['fit_tokens'] == [1024, 4096] and fit['memory_exponent'] > 1.15  # 5x over 4x
    assert results['machine']['load_average'] and results['settings']['mem_limit_gb'] == 2.5
    with open(out / 'scaling.png', 'rb') as f:
        assert f.read(8) == b'\x89PNG\r\n\x1a\n'


def test_cli_time_budget_skips_with_an_estimate(tmp_path):
    out = tmp_path / 'bench'
    log = subprocess.run([
        sys.executable, SCRIPT, '--models', 'vit-test-sdpa', '--resolutions', '32', '1024',
        '2048', '--dtypes', 'fp32', 'fp16', '--time-budget', '0.001', '--threads', '1',
        '--out', str(out)
    ], check=True, capture_output=True, text=True).stdout
    with open(out / 'results.json') as f:
        rows = json.load(f)['results']
    fp32 = [r for r in rows if r['dtype'] == 'fp32']
    assert [r['status'] for r in fp32] == ['ok', 'skipped', 'skipped']
    assert fp32[1]['note'].startswith('over time budget, est.')
    assert 'smaller resolution was over the time budget' in fp32[2]['note']
    assert all(r['status'] == 'skipped' and 'CUDA only' in r['note']
               for r in rows if r['dtype'] == 'fp16')
    assert fp32[0]['throughput_img_s'] == pytest.approx(1e3 / fp32[0]['median_ms'])
    assert '[6/6]' in log and 'ETA' in log
    table = (out / 'results.md').read_text().splitlines()
    assert table[2].startswith('| vit-test-sdpa | fp16 | forward | 1 | skipped')
    assert 'skipped (over time budget, est.' in table[3]


def test_cli_rejects_unknown_models():
    proc = subprocess.run([sys.executable, SCRIPT, '--models', 'no-such-model'],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and 'unknown model' in proc.stderr and 'infvit-4l-linear' \
        in proc.stderr
