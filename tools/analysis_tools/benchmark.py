"""Latency, throughput and peak memory of backbones over resolutions, batch sizes and dtypes.

Every (model, resolution, batch, dtype, mode) case runs in a fresh Python process, so the peak
memory of one case cannot leak into the next:

- CPU: after the model is built and its weights are resident, the process resets the kernel's
  resident-set high-water mark (``/proc/self/clear_refs``) and reads its RSS; the reported
  peak is ``VmHWM - RSS`` after the timed runs, i.e. the input, the activations and every
  temporary, but not the weights. Where ``clear_refs`` is unavailable, ``ru_maxrss`` minus the
  RSS after construction is used (``mem_method`` in the output says which).
- CUDA: ``torch.cuda.max_memory_allocated`` minus the allocation after construction.

A case is timed after warm-up runs; the median of the repeats is reported. A per-case time
budget keeps quadratic models from hanging: the time of one iteration is extrapolated from the
previous resolutions of the same model (local log-log slope of the last two; after the first
one, the ratio of the model's FLOPs, counted on fake tensors by ``get_flops.py``); a case
whose single iteration would exceed the budget is recorded as skipped with that estimate, and
otherwise warm-up, then repeats, are reduced to fit. Allocation failures are recorded as OOM;
on the CPU ``--mem-limit-gb`` caps the worker's data segment (``RLIMIT_DATA``) so that a large
case fails cleanly instead of pushing the machine into swap or the OOM killer.

Writes ``results.json``, ``results.csv``, ``results.md`` (tables) and ``scaling.png`` (log-log time and memory against
the number of patch tokens, with the exponent fitted by least squares over the largest
completed resolutions) to ``--out``.

Examples:
    python tools/analysis_tools/benchmark.py --models infvit-4l-linear vit-4l-sdpa \\
        --resolutions 224 512 1024 2048 --out work_dirs/bench
    python tools/analysis_tools/benchmark.py --models configs/weightformer/weightformer-t_8xb256-amp_in1k.py \\
        --device cuda --dtypes fp32 bf16 fp16 --mode train --batch-sizes 1 8
"""
import argparse
import csv
import json
import math
import os
import os.path as osp
import platform
import resource
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

DTYPES = ('fp32', 'bf16', 'fp16')
MODES = ('forward', 'train')
DEVICES = ('cpu', 'cuda')
PATCH_SIZE = 16  # every preset uses 16 x 16 patches; tokens on the plots are patch tokens
RESULT_PREFIX = 'BENCHMARK_RESULT '
OK = 'ok'


# ----------------------------------------------------------------------------------------
# Worker: one case in this process.
# ----------------------------------------------------------------------------------------
def _proc_status_kib(field: str) -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise KeyError(field)


def _reset_cpu_peak() -> Tuple[int, str]:
    """Reset the RSS high-water mark if the kernel allows it; returns (baseline bytes, method)."""
    rss = _proc_status_kib('VmRSS') * 1024
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return _proc_status_kib('VmRSS') * 1024, 'VmHWM-after-reset minus RSS'
    except OSError:
        return rss, 'ru_maxrss minus RSS'


def _cpu_peak(method: str) -> int:
    if method.startswith('VmHWM'):
        return _proc_status_kib('VmHWM') * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _is_oom(error: BaseException) -> bool:
    text = str(error).lower()
    return isinstance(error, MemoryError) or 'out of memory' in text or \
        "can't allocate memory" in text or 'cannot allocate memory' in text


def run_case(case: dict) -> dict:
    """Build the model and time it on one input size. Runs in the worker process.

    Args:
        case (dict): ``model``, ``resolution`` (int or [H, W]), ``batch``, ``dtype``, ``mode``,
            ``device``, ``warmup``, ``repeats``, ``threads``, optional ``mem_limit_gb``.

    Returns:
        dict: ``status`` ('ok' or 'OOM'), ``times_ms``, ``median_ms``, ``peak_mem_mb``,
        ``mem_method``, ``params``.
    """
    import torch
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmlinear_benchmark', log_level='WARNING')
    from mmlinear.utils.model_presets import build_backbone

    if case['device'] == 'cpu':
        torch.set_num_threads(case['threads'])
        if case.get('mem_limit_gb'):
            limit = int(case['mem_limit_gb'] * 2**30)
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    device = torch.device(case['device'])
    height, width = _hw(case['resolution'])
    autocast_dtype = {'bf16': torch.bfloat16, 'fp16': torch.float16}.get(case['dtype'])
    result = dict(status=OK, times_ms=[], median_ms=None, peak_mem_mb=None, mem_method=None)
    try:
        model = build_backbone(case['model']).to(device)
        model.train(case['mode'] == 'train')
        result['params'] = sum(p.numel() for p in model.parameters())
        if device.type == 'cuda':
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            baseline, method = torch.cuda.memory_allocated(), 'cuda max_memory_allocated'
        else:
            baseline, method = _reset_cpu_peak()
        result['mem_method'] = method
        x = torch.randn(case['batch'], 3, height, width, device=device)

        def iteration() -> None:
            grad = torch.enable_grad() if case['mode'] == 'train' else torch.inference_mode()
            with grad, torch.autocast(device.type, dtype=autocast_dtype or torch.float32,
                                      enabled=autocast_dtype is not None):
                outs = model(x)
                if case['mode'] == 'train':
                    sum(o.float().sum() for o in outs).backward()
            if case['mode'] == 'train':
                model.zero_grad(set_to_none=True)
            if device.type == 'cuda':
                torch.cuda.synchronize()

        for _ in range(case['warmup']):
            iteration()
        for _ in range(case['repeats']):
            start = time.perf_counter()
            iteration()
            result['times_ms'].append((time.perf_counter() - start) * 1e3)
        peak = (torch.cuda.max_memory_allocated() if device.type == 'cuda' else _cpu_peak(method))
        result['peak_mem_mb'] = max(peak - baseline, 0) / 2**20
        result['median_ms'] = statistics.median(result['times_ms'])
    except Exception as error:  # noqa: BLE001  (only allocation failures are recorded)
        if not _is_oom(error):
            raise
        result.update(status='OOM', error=str(error).splitlines()[0][:200])
    return result


# ----------------------------------------------------------------------------------------
# Driver: the grid, the time budget, the outputs.
# ----------------------------------------------------------------------------------------
def _hw(resolution) -> Tuple[int, int]:
    return (resolution, resolution) if isinstance(resolution, int) else tuple(resolution)


def num_tokens(resolution, patch_size: int = PATCH_SIZE) -> int:
    """Number of patch tokens of an input (the patch embeddings pad to whole patches)."""
    height, width = _hw(resolution)
    return math.ceil(height / patch_size) * math.ceil(width / patch_size)


def fit_exponent(tokens: Sequence[float], values: Sequence[float],
                 last: int = 3) -> Tuple[float, List[float]]:
    """Least-squares slope of log(value) against log(tokens) over the largest ``last`` points.

    Args:
        tokens (Sequence[float]): Token counts (positive).
        values (Sequence[float]): Times or memory (positive), same length.
        last (int): How many of the largest token counts to fit. Defaults to 3.

    Returns:
        tuple[float, list[float]]: The exponent (nan with fewer than two distinct points) and
        the token counts used.
    """
    if len(tokens) != len(values):
        raise ValueError(f'tokens and values differ in length: {len(tokens)} vs {len(values)}')
    if last < 2:
        raise ValueError(f'last must be >= 2 to fit a slope, got {last}')
    points = sorted((t, v) for t, v in zip(tokens, values) if t > 0 and v and v > 0)[-last:]
    if len({t for t, _ in points}) < 2:
        return float('nan'), [t for t, _ in points]
    xs = [math.log(t) for t, _ in points]
    ys = [math.log(v) for _, v in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx)**2 for x in xs)
    return slope, [t for t, _ in points]


def estimate_seconds(history: List[Tuple[int, float]], tokens: int,
                     flop_ratio: Optional[float] = None) -> Optional[float]:
    """Extrapolated seconds of one iteration at ``tokens`` from earlier (tokens, seconds).

    With two or more points the local log-log slope of the last two is used (clamped to
    [1, 2.5]: no backbone here is sub-linear, and a noisy pair must not predict a runaway).
    With one point the time is scaled by ``flop_ratio`` (the model's FLOPs at ``tokens`` over
    those at the measured point) when given, else by the square of the token ratio (the
    worst case of the softmax baseline).
    """
    if not history:
        return None
    (t1, s1) = history[-1]
    if len(history) >= 2 and history[-2][0] != t1:
        (t0, s0) = history[-2]
        exponent = min(max(math.log(s1 / s0) / math.log(t1 / t0), 1.0), 2.5)
        return s1 * (tokens / t1)**exponent
    if flop_ratio is not None:
        return s1 * flop_ratio
    return s1 * (tokens / t1)**2


class FlopRatio:
    """FLOP ratios between resolutions of one model (fake-tensor counts, built lazily)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.backbone = None
        self.flops: Dict[int, int] = {}

    def __call__(self, resolution, reference) -> float:
        from get_flops import count_flops  # a sibling script of this one
        from mmlinear.utils.model_presets import build_backbone
        if self.backbone is None:
            self.backbone = build_backbone(self.model)
            self.backbone.eval()
        for res in (resolution, reference):
            if res not in self.flops:
                self.flops[res] = count_flops(self.backbone, max(_hw(res)))
        return self.flops[resolution] / self.flops[reference]


def plan_runs(estimate: Optional[float], budget: float, warmup: int,
              repeats: int) -> Tuple[int, int]:
    """Warm-up and repeat counts that fit the budget (warm-up is dropped first)."""
    if estimate is None or estimate * (warmup + repeats) <= budget:
        return warmup, repeats
    fit = int(budget // estimate)
    kept_warmup = min(warmup, max(fit - 1, 0)) if fit > 1 else 0
    return kept_warmup, max(min(repeats, fit - kept_warmup), 1)


def launch_case(case: dict, timeout: float) -> dict:
    """Run one case in a fresh interpreter; a crash by signal (OOM killer) is an OOM."""
    cmd = [sys.executable, osp.abspath(__file__), '--worker', json.dumps(case)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(status='timeout', note=f'killed after {timeout:.0f} s')
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    if proc.returncode < 0:
        return dict(status='OOM', note=f'worker killed by signal {-proc.returncode}')
    raise RuntimeError(f'benchmark worker failed for {case}:\n{proc.stderr[-3000:]}')


def machine_info(device: str) -> dict:
    """The machine, software and load the numbers were measured on."""
    import torch
    info = dict(
        date=time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()),
        python=platform.python_version(), torch=torch.__version__,
        cpu=platform.processor() or platform.machine(), cpu_count=os.cpu_count(),
        load_average=list(os.getloadavg()))
    try:
        with open('/proc/cpuinfo') as f:
            info['cpu'] = next(line.split(':', 1)[1].strip() for line in f
                               if line.startswith('model name'))
    except (OSError, StopIteration):
        pass
    if device == 'cuda' and torch.cuda.is_available():
        info['gpu'] = torch.cuda.get_device_name()
    return info


def run_grid(args: argparse.Namespace,
             on_series_done: Optional[Callable[[List[dict]], None]] = None) -> List[dict]:
    """Run every case of the grid, in increasing resolution per series.

    ``on_series_done(rows)`` is called after each series, so that a long run that is
    interrupted keeps what it measured.
    """
    from mmlinear.utils.progress import ProgressETA
    resolutions = sorted(args.resolutions)
    series = [(m, b, d, mode) for m in args.models for b in args.batch_sizes
              for d in args.dtypes for mode in args.modes]
    progress = ProgressETA(len(series) * len(resolutions))
    rows = []
    for model, batch, dtype, mode in series:
        history: List[Tuple[int, float]] = []  # (tokens, seconds per iteration) of this series
        stopped = None  # why larger resolutions are not run any more
        flop_ratio, measured = FlopRatio(model), None
        for resolution in resolutions:
            tokens = num_tokens(resolution)
            row = dict(model=model, resolution=resolution, tokens=tokens, batch=batch,
                       dtype=dtype, mode=mode, device=args.device, status=OK, median_ms=None,
                       throughput_img_s=None, peak_mem_mb=None, repeats=0, warmup=0, note='')
            estimate = estimate_seconds(
                history, tokens,
                flop_ratio(resolution, measured) if len(history) == 1 else None)
            if dtype == 'fp16' and args.device == 'cpu':
                row.update(status='skipped', note='fp16 is benchmarked on CUDA only')
            elif stopped:
                row.update(status='skipped', note=stopped)
            elif estimate is not None and estimate > args.time_budget:
                row.update(status='skipped',
                           note=f'over time budget, est. {estimate:.0f} s per iteration')
                stopped = 'a smaller resolution was over the time budget'
            else:
                warmup, repeats = plan_runs(estimate, args.time_budget, args.warmup,
                                            args.repeats)
                case = dict(model=model, resolution=resolution, batch=batch, dtype=dtype,
                            mode=mode, device=args.device, warmup=warmup, repeats=repeats,
                            threads=args.threads, mem_limit_gb=args.mem_limit_gb)
                timeout = args.worker_timeout or max(120., 4 * args.time_budget)
                result = launch_case(case, timeout)
                row.update(warmup=warmup, repeats=repeats, status=result['status'],
                           note=result.get('note', result.get('error', '')),
                           mem_method=result.get('mem_method'), params=result.get('params'))
                if result['status'] == OK:
                    row.update(median_ms=result['median_ms'], times_ms=result['times_ms'],
                               peak_mem_mb=result['peak_mem_mb'],
                               throughput_img_s=batch / (result['median_ms'] / 1e3))
                    history.append((tokens, result['median_ms'] / 1e3))
                    measured = resolution
                else:
                    stopped = f'a smaller resolution ended with {result["status"]}'
            rows.append(row)
            shown = (f'{row["median_ms"]:.1f} ms, {row["peak_mem_mb"]:.0f} MB'
                     if row['status'] == OK else f'{row["status"]} {row["note"]}')
            progress.step(f'{model} {resolution}px b{batch} {dtype} {mode}: {shown}')
        if on_series_done:
            on_series_done(rows)
    return rows


def summarize_fits(rows: List[dict], last: int) -> List[dict]:
    """Fitted time and memory exponents per series, with the token counts used."""
    fits = []
    keys = sorted({(r['model'], r['batch'], r['dtype'], r['mode']) for r in rows},
                  key=lambda k: [str(v) for v in k])
    for key in keys:
        done = [r for r in rows if (r['model'], r['batch'], r['dtype'], r['mode']) == key
                and r['status'] == OK]
        tokens = [r['tokens'] for r in done]
        time_exp, used = fit_exponent(tokens, [r['median_ms'] for r in done], last)
        mem_exp, _ = fit_exponent(tokens, [r['peak_mem_mb'] for r in done], last)
        fits.append(dict(model=key[0], batch=key[1], dtype=key[2], mode=key[3],
                         time_exponent=time_exp, memory_exponent=mem_exp, fit_tokens=used))
    return fits


def format_exponent(exponent: float) -> str:
    """An exponent for tables and the console; nan (a single point) as 'n/a'."""
    return 'n/a (one point)' if math.isnan(exponent) else f'{exponent:.2f}'


def plot(rows: List[dict], fits: List[dict], path: str, title: str) -> None:
    """Log-log time and peak memory against tokens, one line per series."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for fit in fits:
        key = (fit['model'], fit['batch'], fit['dtype'], fit['mode'])
        done = sorted((r for r in rows if r['status'] == OK and
                       (r['model'], r['batch'], r['dtype'], r['mode']) == key),
                      key=lambda r: r['tokens'])
        if not done:
            continue
        label = fit['model'] + ('' if len({f['dtype'] for f in fits}) == 1 else f' {key[2]}') \
            + ('' if len({f['mode'] for f in fits}) == 1 else f' {key[3]}') \
            + ('' if len({f['batch'] for f in fits}) == 1 else f' b{key[1]}')
        tokens = [r['tokens'] for r in done]
        for ax, field, exp in ((axes[0], 'median_ms', fit['time_exponent']),
                               (axes[1], 'peak_mem_mb', fit['memory_exponent'])):
            suffix = '' if math.isnan(exp) else f' (slope {exp:.2f})'
            ax.plot(tokens, [r[field] for r in done], marker='o', ms=3, label=label + suffix)
    for ax, ylabel in ((axes[0], 'median latency (ms)'), (axes[1], 'peak memory (MB)')):
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xlabel('patch tokens N')
        ax.set_ylabel(ylabel)
        ax.grid(True, which='both', alpha=.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def markdown_tables(rows: List[dict], fits: List[dict]) -> str:
    """Latency / peak-memory table (series x resolution) and the fitted exponents, markdown."""
    resolutions = sorted({r['resolution'] for r in rows}, key=num_tokens)
    lines = ['| model | dtype | mode | batch | ' + ' | '.join(
        f'{r}px ({num_tokens(r):,} tok)' for r in resolutions) + ' |',
        '|---|---|---|---|' + '---|' * len(resolutions)]
    for fit in fits:
        key = (fit['model'], fit['batch'], fit['dtype'], fit['mode'])
        cells = []
        for resolution in resolutions:
            row = next((r for r in rows if r['resolution'] == resolution and
                        (r['model'], r['batch'], r['dtype'], r['mode']) == key), None)
            if row is None:
                cells.append('')
            elif row['status'] == OK:
                cells.append(f'{row["median_ms"]:,.0f} ms / {row["peak_mem_mb"]:,.0f} MB')
            else:
                cells.append(row['status'] + (f' ({row["note"]})' if row['note'] else ''))
        lines.append(f'| {key[0]} | {key[2]} | {key[3]} | {key[1]} | ' + ' | '.join(cells) +
                     ' |')
    lines += ['', '| model | dtype | mode | batch | time exponent | memory exponent | '
              'fitted over N = |', '|---|---|---|---|---|---|---|']
    for fit in fits:
        lines.append(f'| {fit["model"]} | {fit["dtype"]} | {fit["mode"]} | {fit["batch"]} | '
                     f'{format_exponent(fit["time_exponent"])} | '
                     f'{format_exponent(fit["memory_exponent"])} | '
                     f'{", ".join(f"{t:,}" for t in fit["fit_tokens"])} |')
    return '\n'.join(lines) + '\n'


def write_outputs(rows: List[dict], fits: List[dict], args: argparse.Namespace,
                  info: Dict) -> None:
    os.makedirs(args.out, exist_ok=True)
    settings = {k: v for k, v in vars(args).items() if k != 'worker'}
    with open(osp.join(args.out, 'results.json'), 'w') as f:
        json.dump(dict(settings=settings, machine=info, results=rows, fits=fits), f, indent=1)
    fields = ['model', 'resolution', 'tokens', 'batch', 'dtype', 'mode', 'device', 'status',
              'median_ms', 'throughput_img_s', 'peak_mem_mb', 'warmup', 'repeats', 'note']
    with open(osp.join(args.out, 'results.csv'), 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction='ignore')
        writer.writeheader()
        writer.writerows(rows)
    with open(osp.join(args.out, 'results.md'), 'w') as f:
        f.write(markdown_tables(rows, fits))
    title = (f'{args.device}, {info.get("cpu", "")} ({args.threads} threads), '
             f'{info["date"]}; slope = least squares over the largest {args.fit_last} points')
    plot(rows, fits, osp.join(args.out, 'scaling.png'), title)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--worker', help=argparse.SUPPRESS)
    parser.add_argument('--models', nargs='+', default=['infvit-4l-linear', 'infvit-4l-softmax'],
                        help='presets of mmlinear.utils.model_presets or config files')
    parser.add_argument('--resolutions', nargs='+', type=int, default=[224, 512, 1024],
                        help='square input sides in pixels')
    parser.add_argument('--batch-sizes', nargs='+', type=int, default=[1])
    parser.add_argument('--dtypes', nargs='+', default=['fp32'], choices=DTYPES,
                        help='bf16 and fp16 run under autocast; fp16 on CUDA only')
    parser.add_argument('--modes', nargs='+', default=['forward'], choices=MODES,
                        help="'forward' (inference) or 'train' (forward + backward)")
    parser.add_argument('--device', default='cpu', choices=DEVICES)
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--time-budget', type=float, default=60.,
                        help='seconds per case; see the module docstring')
    parser.add_argument('--worker-timeout', type=float, default=None,
                        help='hard limit per case in seconds (default 4 x the budget, '
                        'at least 120)')
    parser.add_argument('--mem-limit-gb', type=float, default=None,
                        help='CPU only: cap on the worker data segment, so a large case '
                        'ends as OOM')
    parser.add_argument('--threads', type=int, default=os.cpu_count(),
                        help='torch CPU threads')
    parser.add_argument('--fit-last', type=int, default=3,
                        help='fit the exponents over this many largest completed resolutions')
    parser.add_argument('--out', default='work_dirs/benchmark')
    args = parser.parse_args(argv)
    if args.worker:
        return args
    if min(args.resolutions) < PATCH_SIZE or min(args.batch_sizes) < 1:
        raise SystemExit(f'--resolutions must be >= {PATCH_SIZE} and --batch-sizes >= 1')
    if args.warmup < 0 or args.repeats < 1 or args.time_budget <= 0 or args.fit_last < 2:
        raise SystemExit('need --warmup >= 0, --repeats >= 1, --time-budget > 0 and '
                         '--fit-last >= 2')
    if args.device == 'cuda':
        import torch
        if not torch.cuda.is_available():
            raise SystemExit('--device cuda given but CUDA is not available')
    from mmlinear.utils.model_presets import backbone_config
    for model in args.models:
        try:
            backbone_config(model)
        except ValueError as error:
            raise SystemExit(str(error))
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    if args.worker:
        print(RESULT_PREFIX + json.dumps(run_case(json.loads(args.worker))), flush=True)
        return
    info = machine_info(args.device)
    print(f'{info["date"]}: {info["cpu"]}, {args.threads} threads, load average '
          f'{" ".join(f"{x:.2f}" for x in info["load_average"])}', flush=True)

    def save(rows: List[dict]) -> None:
        info['load_average_after'] = list(os.getloadavg())
        write_outputs(rows, summarize_fits(rows, args.fit_last), args, info)

    rows = run_grid(args, on_series_done=save)
    fits = summarize_fits(rows, args.fit_last)
    for fit in fits:
        print(f'{fit["model"]} b{fit["batch"]} {fit["dtype"]} {fit["mode"]}: time exponent '
              f'{format_exponent(fit["time_exponent"])}, memory exponent '
              f'{format_exponent(fit["memory_exponent"])} '
              f'(fitted over N = {fit["fit_tokens"]})')
    print(f'wrote {args.out}/results.json, results.csv, results.md and scaling.png')


if __name__ == '__main__':
    main()
