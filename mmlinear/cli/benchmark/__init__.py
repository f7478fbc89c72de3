"""Latency, throughput and peak memory of backbones over resolutions, batch sizes and dtypes.

One concern per module: :mod:`.cases` (what a case is), :mod:`.worker` (measuring one case in
a fresh process), :mod:`.planner` (which cases run and how often, under a time budget),
:mod:`.report` (fitted exponents and the written results) and :mod:`.plotting` (the figure).
The measuring primitives they share with every other benchmark tool need no OpenMMLab package
and sit in :mod:`mmlinear.utils`, so that ``tools/analysis_tools/benchmark_ops.py`` runs on a
bare GPU image: :mod:`~mmlinear.utils.timing` (the timing loops),
:mod:`~mmlinear.utils.peak_memory` (a process's peak memory and its cap) and
:mod:`~mmlinear.utils.fresh_process` (the launcher of a measurement in a fresh process); they
are re-exported here.
``tools/analysis_tools/benchmark.py`` is their command line.
"""
from mmlinear.utils.fresh_process import WorkerFailed, print_result, run_in_fresh_process
from mmlinear.utils.peak_memory import cpu_peak, is_oom, limit_data_segment, reset_cpu_peak
from mmlinear.utils.timing import interleaved_ms, median_ms, time_ms
from .cases import (DEVICES, DTYPES, MODES, OK, PATCH_SIZE, REFUSED, STREAM_INPUTS, image_hw,
                    num_tokens, series_key)
from .planner import (FlopRatio, GridSettings, SeriesPlanner, Step, estimate_seconds, plan_runs,
                      run_grid)
from .plotting import plot_scaling
from .report import (fit_exponent, fit_line, format_exponent, machine_info, markdown_tables,
                     summarize_fits, write_outputs)
from .worker import launch_case, run_case

__all__ = [
    'DEVICES', 'DTYPES', 'MODES', 'OK', 'PATCH_SIZE', 'REFUSED', 'STREAM_INPUTS', 'FlopRatio',
    'GridSettings', 'SeriesPlanner', 'Step', 'WorkerFailed', 'cpu_peak', 'estimate_seconds',
    'fit_exponent', 'fit_line', 'format_exponent', 'interleaved_ms', 'image_hw', 'is_oom',
    'launch_case', 'limit_data_segment', 'machine_info', 'markdown_tables', 'median_ms',
    'num_tokens', 'plan_runs', 'plot_scaling', 'print_result', 'reset_cpu_peak', 'run_case',
    'run_grid', 'run_in_fresh_process', 'series_key', 'summarize_fits', 'time_ms', 'write_outputs'
]
