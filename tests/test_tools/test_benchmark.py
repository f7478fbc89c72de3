"""The benchmark's command line, end to end in worker processes (the command itself runs in
this process: a subprocess for it would only add seconds of imports).

The outcomes asserted here must not depend on how fast or how loaded the machine is: the OOM
case gets a time budget of hours (the planner never skips it by time, the memory cap alone
decides), the skip case a budget no real forward pass can meet, and every worker a hard limit
far above what it needs. The planner's decisions themselves are checked with made-up timings
in ``tests/test_cli/test_benchmark_planner.py``.
"""
import csv
import json
import os.path as osp
import subprocess
import sys

import pytest
from analysis_tools_loader import TOOLS_DIR, load_tool, run_tool_main

SCRIPT = osp.join(TOOLS_DIR, 'benchmark.py')
HOURS = '36000'  # a time budget and worker limit no case here comes near


def benchmark(*args):
    """The command line in this process; it exits 0."""
    result = run_tool_main(load_tool('benchmark'), *args)
    assert result.returncode == 0, result.stderr
    return result


def test_cli_records_oom_skips_and_quadratic_memory(tmp_path, monkeypatch):
    """Pure InfSA's reference op (an N x N score matrix; the compiled kernel is switched off) in
    fresh processes: the memory grows about as N^2, a case over the memory cap is an OOM (not a
    crash)."""
    out = tmp_path / 'bench'
    monkeypatch.setenv('MMLINEAR_DISABLE_EXT', '1')  # the workers inherit it
    benchmark('--models', 'infvit-test-pure', '--resolutions', '512', '1024', '2048', '--repeats',
              '1', '--warmup', '0', '--threads', '1', '--time-budget', HOURS, '--worker-timeout',
              HOURS, '--mem-limit-gb', '2.5', '--fit-last', '2', '--out', out)
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
    """A microsecond budget: 1024 px extrapolates from the 32 px forward pass by the FLOP
    ratio (over 800x), so it is over the budget however fast the 32 px pass ran."""
    out = tmp_path / 'bench'
    log = benchmark('--models', 'vit-test-sdpa', '--resolutions', '32', '1024', '2048', '--dtypes',
                    'fp32', 'fp16', '--time-budget', '1e-6', '--worker-timeout', HOURS, '--threads',
                    '1', '--out', out).stdout
    with open(out / 'results.json') as f:
        rows = json.load(f)['results']
    fp32 = [r for r in rows if r['dtype'] == 'fp32']
    assert [r['status'] for r in fp32] == ['ok', 'skipped', 'skipped']
    assert fp32[1]['note'].startswith('over time budget, est.')
    assert 'smaller resolution was over the time budget' in fp32[2]['note']
    assert all(r['status'] == 'skipped' and 'CUDA only' in r['note'] for r in rows
               if r['dtype'] == 'fp16')
    assert fp32[0]['throughput_img_s'] == pytest.approx(1e3 / fp32[0]['median_ms'])
    assert '[6/6]' in log and 'ETA' in log
    table = (out / 'results.md').read_text().splitlines()
    assert table[2].startswith('| vit-test-sdpa | fp16 | forward | 1 | skipped')
    assert 'skipped (over time budget, est.' in table[3]


@pytest.mark.slow
def test_cli_compile_reports_compiled_against_eager(tmp_path):
    """--compile times the same case through torch.compile(fullgraph=True) in the worker; the
    ratio is whatever the machine gives, so only its consistency is checked. Slow: inductor
    compiles the forward pass in the worker (minutes on a shared CPU)."""
    out = tmp_path / 'bench'
    subprocess.run([
        sys.executable, SCRIPT, '--models', 'infvit-test-pure', '--resolutions', '32', '--repeats',
        '1', '--warmup', '0', '--threads', '1', '--time-budget', HOURS, '--worker-timeout', HOURS,
        '--compile', '--out',
        str(out)
    ],
                   check=True,
                   capture_output=True,
                   text=True)
    with open(out / 'results.json') as f:
        results = json.load(f)
    (row, ) = results['results']
    assert results['settings']['compile'] is True
    assert row['status'] == 'ok' and row['compile_s'] > 0 and len(row['compiled_times_ms']) == 1
    assert row['compiled_over_eager'] == pytest.approx(row['compiled_median_ms'] / row['median_ms'])
    with open(out / 'results.csv') as f:
        assert float(next(csv.DictReader(f))['compiled_median_ms']) == row['compiled_median_ms']
    table = (out / 'results.md').read_text()
    assert '| compiled / eager |' in table and '| infvit-test-pure | fp32 | forward | 1 | 32px |' \
        in table


def test_cli_rejects_unknown_models():
    result = run_tool_main(load_tool('benchmark'), '--models', 'no-such-model')
    assert result.returncode != 0 and 'unknown model' in result.stderr and 'infvit-4l-linear' \
        in result.stderr


def test_the_retired_band_height_flag_warns_and_sets_the_same_option():
    tool = load_tool('benchmark')
    new = tool.parse_args(['--models', 'infvit-test-linear', '--band-rows', '3'])
    with pytest.warns(FutureWarning, match="'--chunk-rows' is deprecated .* use '--band-rows'"):
        old = tool.parse_args(['--models', 'infvit-test-linear', '--chunk-rows', '3'])
    assert vars(old) == vars(new) and new.band_rows == 3
