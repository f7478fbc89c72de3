"""Latency, throughput and peak memory of backbones (and whole segmentors) over resolutions,
batch sizes and dtypes.

Every (model, resolution, batch, dtype, mode) case runs in a fresh Python process, so the peak
memory of one case cannot leak into the next (CPU: the resident-set high-water mark above the
RSS after construction, i.e. without the weights; CUDA: ``max_memory_allocated`` above the
allocation after construction). A case is timed after warm-up runs; the median of the repeats
is reported. A per-case time budget keeps quadratic models from hanging: the time of one
iteration is extrapolated from the previous resolutions of the same model, and a case whose
single iteration would exceed the budget is recorded as skipped with that estimate. Allocation
failures are recorded as OOM; on the CPU ``--mem-limit-gb`` caps the worker's data segment so
that a large case fails cleanly instead of pushing the machine into swap. An input the built
model refuses (more tokens than a Linformer's projections were built for, say) is recorded
as 'refused' with the model's reason, and the larger resolutions of its series are skipped.
The details are in ``mmlinear.cli.benchmark`` (``worker``, ``planner``, ``report``,
``plotting``).

Writes ``results.json``, ``results.csv``, ``results.md`` (tables) and ``scaling.png``
(log-log time and memory against the number of patch tokens, with the exponent fitted by least
squares over the largest completed resolutions) to ``--out``.

Examples:
    python tools/analysis_tools/benchmark.py --models infvit-4l-linear vit-4l-sdpa \\
        --resolutions 224 512 1024 2048 --out work_dirs/bench
    python tools/analysis_tools/benchmark.py \\
        --models configs/weightformer/weightformer-t_8xb256-amp_in1k.py \\
        --device cuda --dtypes fp32 bf16 fp16 --mode train --batch-sizes 1 8
    python tools/analysis_tools/benchmark.py --models infvit-test-pure --resolutions 128 \\
        --compile --worker-timeout 1800 --out work_dirs/bench_compile
    python tools/analysis_tools/benchmark.py --models infvit-4l-linear --resolutions 4096 \\
        --modes forward streamed --out work_dirs/bench_streamed
"""
import argparse
import os
from dataclasses import fields
from typing import List, Optional, Sequence

from mmlinear.apis import backbone_config
from mmlinear.cli.benchmark import (DEVICES, DTYPES, MODES, STREAM_INPUTS, GridSettings, fit_line,
                                    machine_info, run_grid, summarize_fits, write_outputs)
from mmlinear.models.streaming.token_stream import BUFFERS
from mmlinear.utils.deprecation import RenamedFlag

DEFAULTS = GridSettings()


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--models',
        nargs='+',
        default=DEFAULTS.models,
        help='presets of mmlinear.apis.BACKBONE_PRESETS or config files')
    parser.add_argument(
        '--resolutions',
        nargs='+',
        type=int,
        default=DEFAULTS.resolutions,
        help='square input sides in pixels')
    parser.add_argument('--batch-sizes', nargs='+', type=int, default=DEFAULTS.batch_sizes)
    parser.add_argument(
        '--dtypes',
        nargs='+',
        default=DEFAULTS.dtypes,
        choices=DTYPES,
        help='bf16 and fp16 run under autocast; fp16 on CUDA only')
    parser.add_argument(
        '--modes',
        nargs='+',
        default=DEFAULTS.modes,
        choices=MODES,
        help="'forward' (inference), 'train' (forward + backward) or 'streamed' "
        '(Backbone.forward_streamed: the same outputs over bands of patch rows)')
    parser.add_argument(
        '--band-rows',
        type=int,
        default=DEFAULTS.band_rows,
        help='streamed mode: patch rows per band (default: the model picks)')
    parser.add_argument(
        '--chunk-rows',
        type=int,
        dest='band_rows',
        action=RenamedFlag,
        new='--band-rows',
        help=argparse.SUPPRESS)
    parser.add_argument(
        '--stream-buffer',
        default=DEFAULTS.stream_buffer,
        choices=BUFFERS,
        help="streamed mode: the residual stream in memory or in a mapped file ('disk')")
    parser.add_argument(
        '--stream-input',
        default=DEFAULTS.stream_input,
        choices=STREAM_INPUTS,
        help="streamed mode: the image as one tensor, or a raw file read by rows ('file')")
    parser.add_argument('--device', default=DEFAULTS.device, choices=DEVICES)
    parser.add_argument('--warmup', type=int, default=DEFAULTS.warmup)
    parser.add_argument('--repeats', type=int, default=DEFAULTS.repeats)
    parser.add_argument(
        '--time-budget',
        type=float,
        default=DEFAULTS.time_budget,
        help='seconds per case: a resolution whose extrapolated single '
        'iteration exceeds it is skipped, warm-up and repeats are cut to fit')
    parser.add_argument(
        '--worker-timeout',
        type=float,
        default=DEFAULTS.worker_timeout,
        help='hard limit per case in seconds (default 4 x the budget, '
        'at least 120)')
    parser.add_argument(
        '--mem-limit-gb',
        type=float,
        default=DEFAULTS.mem_limit_gb,
        help='CPU only: cap on the worker data segment, so a large case '
        'ends as OOM')
    parser.add_argument('--threads', type=int, default=DEFAULTS.threads, help='torch CPU threads')
    parser.add_argument(
        '--compile',
        action='store_true',
        help='also time torch.compile(model, fullgraph=True) (inductor) after the eager runs '
        'of each case and report compiled / eager; compilation can take minutes per case on a '
        'CPU, so raise --worker-timeout')
    parser.add_argument(
        '--fit-last',
        type=int,
        default=3,
        help='fit the exponents over this many largest completed resolutions')
    parser.add_argument('--out', default='work_dirs/benchmark')
    args = parser.parse_args(argv)
    if args.fit_last < 2:
        raise SystemExit(f'need --fit-last >= 2, got {args.fit_last}')
    if args.device == 'cuda':
        import torch
        if not torch.cuda.is_available():
            raise SystemExit('--device cuda given but CUDA is not available')
    for model in args.models:
        try:
            backbone_config(model)
        except ValueError as error:
            raise SystemExit(str(error))
    return args


def grid_settings(args: argparse.Namespace) -> GridSettings:
    """The grid of the parsed options; an invalid one exits with the reason."""
    try:
        return GridSettings(**{f.name: getattr(args, f.name) for f in fields(GridSettings)})
    except ValueError as error:
        raise SystemExit(str(error))


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    settings = grid_settings(args)
    info = machine_info(args.device)
    print(
        f'{info["date"]}: {info["cpu"]} (kernels {info["kernel_isa"]}), {args.threads} threads, '
        f'load average '
        f'{" ".join(f"{x:.2f}" for x in info["load_average"])}',
        flush=True)

    def save(rows: List[dict]) -> None:
        info['load_average_after'] = list(os.getloadavg())
        write_outputs(args.out, rows, summarize_fits(rows, args.fit_last), vars(args), info)

    rows = run_grid(settings, on_series_done=save)
    for fit in summarize_fits(rows, args.fit_last):
        print(fit_line(fit))
    print(f'wrote {args.out}/results.json, results.csv, results.md and scaling.png')


if __name__ == '__main__':
    main()
