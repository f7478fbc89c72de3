"""Latency, throughput and peak memory of backbones over resolutions, batch sizes and dtypes.

One concern per module: :mod:`.cases` (what a case is), :mod:`.worker` (measuring one case in
a fresh process), :mod:`.planner` (which cases run and how often, under a time budget),
:mod:`.report` (fitted exponents and the written results), :mod:`.plotting` (the figure),
:mod:`.memory` (a process's peak memory and its cap, shared with
``tools/analysis_tools/training_step.py``); the timing loops are :mod:`mmlinear.utils.timing`,
which the op benchmark of a bare GPU image (torch alone) shares.
``tools/analysis_tools/benchmark.py`` is their command line.
"""
from mmlinear.utils.timing import interleaved_ms, median_ms, time_ms
from .cases import (DEVICES, DTYPES, MODES, OK, PATCH_SIZE, STREAM_INPUTS, image_hw, num_tokens,
                    series_key)
from .memory import cpu_peak, is_oom, limit_data_segment, reset_cpu_peak
from .planner import (FlopRatio, GridSettings, SeriesPlanner, Step, estimate_seconds, plan_runs,
                      run_grid)
from .plotting import plot_scaling
from .report import (fit_exponent, fit_line, format_exponent, machine_info, markdown_tables,
                     summarize_fits, write_outputs)
from .worker import launch_case, run_case

__all__ = [
    'DEVICES', 'DTYPES', 'MODES', 'OK', 'PATCH_SIZE', 'STREAM_INPUTS', 'FlopRatio', 'GridSettings',
    'SeriesPlanner', 'Step', 'cpu_peak', 'estimate_seconds', 'fit_exponent', 'fit_line',
    'format_exponent', 'interleaved_ms', 'image_hw', 'is_oom', 'launch_case', 'limit_data_segment',
    'machine_info', 'markdown_tables', 'median_ms', 'num_tokens', 'plan_runs', 'plot_scaling',
    'reset_cpu_peak', 'run_case', 'run_grid', 'series_key', 'summarize_fits', 'time_ms',
    'write_outputs'
]
