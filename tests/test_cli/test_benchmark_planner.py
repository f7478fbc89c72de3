"""The benchmark planner's decisions, from made-up timings: nothing here is timed, so the
outcomes do not depend on the machine's speed or load."""
import pytest

from mmlinear.cli.benchmark import (FlopRatio, GridSettings, SeriesPlanner, Step, estimate_seconds,
                                    markdown_tables, num_tokens, plan_runs, run_grid,
                                    summarize_fits)


def test_time_extrapolation_and_run_planning():
    assert estimate_seconds([], 1000) is None
    # One point: quadratic (the worst case of the baselines).
    assert estimate_seconds([(100, 1.0)], 400) == pytest.approx(16.0)
    # Two points: their local slope (here 1), clamped to [1, 2.5].
    assert estimate_seconds([(100, 1.0), (400, 4.0)], 1600) == pytest.approx(16.0)
    assert estimate_seconds([(100, 1.0), (200, 1.0)], 400) == pytest.approx(2.0)
    assert estimate_seconds([(100, 1.0), (200, 100.0)], 400) == pytest.approx(100 * 2**2.5)
    # One point and the model's FLOP ratio: the ratio wins.
    assert estimate_seconds([(100, 2.0)], 400, flop_ratio=3.0) == pytest.approx(6.)
    ratio = FlopRatio('infvit-test-linear')(256, 128)
    assert 3 < ratio < 4  # affine in N: 4x the tokens, a bit less than 4x the FLOPs
    assert plan_runs(None, 10, 1, 3) == (1, 3)
    assert plan_runs(2.0, 10, 1, 3) == (1, 3)  # 8 s fit in 10 s
    assert plan_runs(4.0, 10, 1, 3) == (1, 1)  # two runs fit: warm-up + one
    assert plan_runs(8.0, 10, 1, 3) == (0, 1)  # one run: warm-up dropped first
    assert num_tokens(224) == 196 and num_tokens((230, 100)) == 15 * 7


def test_series_planner_shrinks_then_skips_over_the_budget():
    ratios = []

    def flop_ratio(resolution, reference):
        ratios.append((resolution, reference))
        return 4.0

    planner = SeriesPlanner(time_budget=10, warmup=1, repeats=3, flop_ratio=flop_ratio)
    assert planner.plan(224) == Step(run=True, warmup=1, repeats=3)  # nothing to go by yet
    planner.record(224, dict(status='ok', median_ms=1000.))
    # One point: 4x the FLOPs, 4 s per iteration; 16 s do not fit in 10, warm-up + 1 do.
    assert planner.plan(448) == Step(run=True, warmup=1, repeats=1)
    assert ratios == [(448, 224)]
    planner.record(448, dict(status='ok', median_ms=4000.))
    # Two points, slope 1: 4x the tokens again is 16 s for one iteration, over the budget.
    assert planner.plan(896) == Step(run=False, note='over time budget, est. 16 s per iteration')
    assert planner.plan(1792) == Step(
        run=False, note='a smaller resolution was over the time budget')
    assert ratios == [(448, 224)]  # the FLOP ratio only serves the second resolution


def test_a_budget_of_hours_never_skips_after_a_slow_run():
    """The case of a loaded machine: 1024 px took 2.11 s, so 2048 px extrapolates to 64 s.
    A 60 s budget skips it; a budget of hours runs it, so only its memory decides."""
    slow = ((512, 70.), (1024, 2110.))  # ms per iteration at 1,024 and 4,096 tokens
    for budget, expected in ((60, Step(run=False,
                                       note='over time budget, est. 64 s per iteration')),
                             (36000, Step(run=True, warmup=0, repeats=1))):
        planner = SeriesPlanner(time_budget=budget, warmup=0, repeats=1)
        for resolution, ms in slow:
            assert planner.plan(resolution).run
            planner.record(resolution, dict(status='ok', median_ms=ms))
        assert planner.plan(2048) == expected


def test_a_failed_case_stops_its_series():
    planner = SeriesPlanner(time_budget=36000, warmup=0, repeats=1)
    assert planner.plan(512).run
    planner.record(512, dict(status='OOM', error="can't allocate memory"))
    assert planner.plan(1024) == Step(run=False, note='a smaller resolution ended with OOM')


def test_grid_runs_the_planned_cases_and_records_their_results(capsys):
    results = {
        512:
        dict(
            status='ok',
            median_ms=100.,
            times_ms=[100.],
            peak_mem_mb=10.,
            mem_method='VmHWM-after-reset minus RSS',
            params=5),
        1024:
        dict(
            status='ok',
            median_ms=2110.,
            times_ms=[2110.],
            peak_mem_mb=150.,
            mem_method='VmHWM-after-reset minus RSS',
            params=5),
        2048:
        dict(status='OOM', error="can't allocate memory")
    }
    launched, saved = [], []

    def launch(case, timeout):
        launched.append((case, timeout))
        return results[case['resolution']]

    settings = GridSettings(
        models=['infvit-test-pure'],
        resolutions=[1024, 2048, 512],
        dtypes=['fp32', 'fp16'],
        warmup=0,
        repeats=1,
        time_budget=36000,
        mem_limit_gb=2.5,
        threads=1)
    rows = run_grid(
        settings,
        on_series_done=lambda rows: saved.append(len(rows)),
        launch=launch,
        flop_ratio=lambda model: lambda res, ref: 4.0)
    assert [(r['dtype'], r['resolution'], r['status']) for r in rows] == [('fp32', 512, 'ok'),
                                                                          ('fp32', 1024, 'ok'),
                                                                          ('fp32', 2048, 'OOM'),
                                                                          ('fp16', 512, 'skipped'),
                                                                          ('fp16', 1024, 'skipped'),
                                                                          ('fp16', 2048, 'skipped')]
    assert saved == [3, 6]
    assert [case['resolution'] for case, _ in launched] == [512, 1024, 2048]
    case, timeout = launched[0]
    assert timeout == 4 * 36000
    assert case == dict(
        model='infvit-test-pure',
        resolution=512,
        batch=1,
        dtype='fp32',
        mode='forward',
        device='cpu',
        warmup=0,
        repeats=1,
        threads=1,
        mem_limit_gb=2.5,
        compile=False)
    assert rows[0]['throughput_img_s'] == pytest.approx(10.) and rows[1]['peak_mem_mb'] == 150.
    assert rows[2]['note'] == "can't allocate memory" and rows[2]['median_ms'] is None
    assert all(r['note'] == 'fp16 is benchmarked on CUDA only' for r in rows[3:])
    log = capsys.readouterr().out
    assert '[3/6] infvit-test-pure 2048px b1 fp32 forward: OOM' in log


def test_compiled_times_are_reported_against_eager(capsys):
    result = dict(
        status='ok',
        median_ms=100.,
        times_ms=[100.],
        peak_mem_mb=10.,
        compile_s=30.,
        compiled_times_ms=[40.],
        compiled_median_ms=40.)
    launched = []
    settings = GridSettings(
        models=['infvit-test-pure'], resolutions=[64], repeats=1, threads=1, compile=True)
    (row, ) = run_grid(
        settings,
        launch=lambda case, timeout: launched.append(case) or result,
        flop_ratio=lambda model: None)
    assert launched[0]['compile'] is True
    assert row['compiled_median_ms'] == 40. and row['compile_s'] == 30.
    assert row['compiled_over_eager'] == pytest.approx(0.4)
    assert 'compiled 40.0 ms (0.40 x eager)' in capsys.readouterr().out
    table = markdown_tables([row], summarize_fits([row], 2)).splitlines()
    assert table[-1] == ('| infvit-test-pure | fp32 | forward | 1 | 64px | 100.0 ms | 40.0 ms | '
                         '0.40 | 30.0 s |')


def test_grid_settings_name_what_is_wrong():
    assert GridSettings(worker_timeout=None, time_budget=10).timeout == 120.
    assert GridSettings(worker_timeout=30).timeout == 30
    with pytest.raises(ValueError, match=r'resolutions must be >= 16 .*\[8\]'):
        GridSettings(resolutions=[8])
    with pytest.raises(ValueError, match='need warmup >= 0, repeats >= 1'):
        GridSettings(repeats=0)
    with pytest.raises(ValueError, match=r"unknown dtypes \['fp8'\]; allowed: fp32, bf16, fp16"):
        GridSettings(dtypes=['fp32', 'fp8'])
    with pytest.raises(ValueError, match=r"unknown device \['tpu'\]; allowed: cpu, cuda"):
        GridSettings(device='tpu')
    with pytest.raises(ValueError, match='must not be empty'):
        GridSettings(models=[])
