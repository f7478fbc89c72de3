"""Which benchmark cases run, and with how many repeats: the grid and its time budget.

A per-case time budget keeps quadratic models from hanging: the time of one iteration is
extrapolated from the previous resolutions of the same series (local log-log slope of the last
two; after the first one, the ratio of the model's FLOPs, counted on fake tensors by
:func:`mmlinear.apis.count_flops`). A case whose single iteration would exceed the budget is
recorded as skipped with that estimate, and so is every larger resolution of its series;
otherwise warm-up, then repeats, are reduced to fit.

The decisions depend only on the timings they are given, so :class:`SeriesPlanner` and
:func:`run_grid` (with an injected ``launch``) can be checked with made-up timings.
"""
import math
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from mmlinear.models.streaming.token_stream import BUFFERS
from .cases import (DEVICES, DTYPES, MODES, OK, PATCH_SIZE, STREAM_INPUTS, Resolution, image_hw,
                    num_tokens)
from .worker import launch_case

#: (resolution, reference resolution) -> FLOPs at the first over FLOPs at the second, or None
#: where the model refuses the first.
FlopRatioFn = Callable[[Resolution, Resolution], Optional[float]]
#: (case, timeout in seconds) -> the worker's result (see ``worker.run_case``).
LaunchFn = Callable[[dict, float], dict]


def estimate_seconds(history: Sequence[Tuple[int, float]],
                     tokens: int,
                     flop_ratio: Optional[float] = None) -> Optional[float]:
    """Extrapolated seconds of one iteration at ``tokens`` from earlier (tokens, seconds).

    With two or more points the local log-log slope of the last two is used (clamped to
    [1, 2.5]: no backbone here is sub-linear, and a noisy pair must not predict a runaway).
    With one point the time is scaled by ``flop_ratio`` when given, else by the square of the
    token ratio (the worst case of the softmax baseline).

    Args:
        history (Sequence[tuple[int, float]]): (tokens, seconds per iteration) measured so far
            in this series, in increasing resolution.
        tokens (int): The token count to extrapolate to.
        flop_ratio (float, optional): The model's FLOPs at ``tokens`` over those at the last
            measured point.

    Returns:
        float | None: The estimate, None without any measured point.
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


def plan_runs(estimate: Optional[float], budget: float, warmup: int,
              repeats: int) -> Tuple[int, int]:
    """Warm-up and repeat counts that fit the budget (warm-up is dropped first).

    Args:
        estimate (float, optional): Estimated seconds per iteration; None runs everything.
        budget (float): Seconds per case.
        warmup (int): Requested warm-up iterations.
        repeats (int): Requested timed iterations.

    Returns:
        tuple[int, int]: (warm-up, repeats), at least one repeat.
    """
    if estimate is None or estimate * (warmup + repeats) <= budget:
        return warmup, repeats
    fit = int(budget // estimate)
    kept_warmup = min(warmup, max(fit - 1, 0)) if fit > 1 else 0
    return kept_warmup, max(min(repeats, fit - kept_warmup), 1)


class FlopRatio:
    """FLOP ratios between resolutions of one model (fake-tensor counts, built lazily).

    Args:
        model (str): A preset of :data:`mmlinear.apis.BACKBONE_PRESETS` or a config file.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.backbone = None
        self.flops: Dict[Resolution, int] = {}

    def __call__(self, resolution: Resolution, reference: Resolution) -> Optional[float]:
        """FLOPs at ``resolution`` over FLOPs at ``reference`` (square inputs of the larger
        side); None where the model refuses the input (a ValueError), whose case then runs
        and records the refusal."""
        from mmlinear.apis.flops import count_flops
        from mmlinear.apis.model_presets import build_backbone
        if self.backbone is None:
            # The weights do not change the count: nothing pretrained is loaded.
            self.backbone = build_backbone(self.model, dict(init_cfg=None))
            self.backbone.eval()
        try:
            for res in (resolution, reference):
                if res not in self.flops:
                    self.flops[res] = count_flops(self.backbone, max(image_hw(res)))
        except ValueError:
            return None
        return self.flops[resolution] / self.flops[reference]


@dataclass
class Step:
    """The planner's decision for one resolution of a series.

    Args:
        run (bool): Whether the case runs.
        note (str): Why it does not run (empty when it runs).
        warmup (int): Warm-up iterations of a case that runs.
        repeats (int): Timed iterations of a case that runs.
    """
    run: bool
    note: str = ''
    warmup: int = 0
    repeats: int = 0


class SeriesPlanner:
    """Decides, resolution after resolution of one series, whether and how a case runs.

    Call :meth:`plan` for a resolution, run the case if it says so, then :meth:`record` its
    result; resolutions must come in increasing order.

    Args:
        time_budget (float): Seconds per case.
        warmup (int): Requested warm-up iterations.
        repeats (int): Requested timed iterations.
        flop_ratio (Callable, optional): (resolution, reference) -> FLOP ratio, used to
            extrapolate from a single measured point. Without it, the quadratic worst case.
    """

    def __init__(self,
                 time_budget: float,
                 warmup: int,
                 repeats: int,
                 flop_ratio: Optional[FlopRatioFn] = None) -> None:
        self.time_budget = time_budget
        self.warmup = warmup
        self.repeats = repeats
        self.flop_ratio = flop_ratio
        self.history: List[Tuple[int, float]] = []  # (tokens, seconds per iteration)
        self.measured: Optional[Resolution] = None  # the last resolution that completed
        self.stopped = ''  # why larger resolutions do not run any more

    def plan(self, resolution: Resolution) -> Step:
        """The decision for ``resolution``.

        Args:
            resolution (int | Sequence[int]): The next resolution of the series.

        Returns:
            Step: Skipped with a note, or run with warm-up and repeat counts.
        """
        if self.stopped:
            return Step(run=False, note=self.stopped)
        ratio = None
        if len(self.history) == 1 and self.flop_ratio is not None:
            ratio = self.flop_ratio(resolution, self.measured)
        estimate = estimate_seconds(self.history, num_tokens(resolution), ratio)
        if estimate is not None and estimate > self.time_budget:
            self.stopped = 'a smaller resolution was over the time budget'
            return Step(run=False, note=f'over time budget, est. {estimate:.0f} s per iteration')
        warmup, repeats = plan_runs(estimate, self.time_budget, self.warmup, self.repeats)
        return Step(run=True, warmup=warmup, repeats=repeats)

    def record(self, resolution: Resolution, result: dict) -> None:
        """Take the result of a case that ran into account.

        Args:
            resolution (int | Sequence[int]): Its resolution.
            result (dict): The worker's result: ``status`` and, when 'ok', ``median_ms``.
        """
        if result['status'] == OK:
            self.history.append((num_tokens(resolution), result['median_ms'] / 1e3))
            self.measured = resolution
        else:
            self.stopped = f'a smaller resolution ended with {result["status"]}'


@dataclass
class GridSettings:
    """The benchmark grid: every (model, batch, dtype, mode) series over the resolutions.

    Args:
        models (list[str]): Presets or config files.
        resolutions (list[int]): Square input sides in pixels.
        batch_sizes (list[int]): Batch sizes.
        dtypes (list[str]): 'fp32', 'bf16' (autocast) or 'fp16' (autocast, CUDA only).
        modes (list[str]): 'forward' (inference) or 'train' (forward + backward).
        device (str): 'cpu' or 'cuda'.
        warmup (int): Warm-up iterations per case.
        repeats (int): Timed iterations per case.
        time_budget (float): Seconds per case, see the module docstring.
        worker_timeout (float, optional): Hard limit per case in seconds; by default 4 x the
            budget, at least 120.
        mem_limit_gb (float, optional): CPU only: cap on the worker's data segment.
        threads (int): torch CPU threads of the worker.
        compile (bool): Also time each case through ``torch.compile(fullgraph=True)`` and
            report compiled against eager time. The time budget plans the eager runs.
        band_rows (int, optional): Streamed cases: patch rows per band. Defaults to None
            (the model's default band).
        stream_buffer (str): Streamed cases: 'memory' or 'disk'. Defaults to 'memory'.
        stream_input (str): Streamed cases: the image as one 'tensor', or a raw 'file' read
            by rows. Defaults to 'tensor'.
    """
    models: List[str] = field(default_factory=lambda: ['infvit-4l-linear', 'infvit-4l-softmax'])
    resolutions: List[int] = field(default_factory=lambda: [224, 512, 1024])
    batch_sizes: List[int] = field(default_factory=lambda: [1])
    dtypes: List[str] = field(default_factory=lambda: ['fp32'])
    modes: List[str] = field(default_factory=lambda: ['forward'])
    device: str = 'cpu'
    warmup: int = 1
    repeats: int = 3
    time_budget: float = 60.
    worker_timeout: Optional[float] = None
    mem_limit_gb: Optional[float] = None
    threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    compile: bool = False
    band_rows: Optional[int] = None
    stream_buffer: str = 'memory'
    stream_input: str = 'tensor'

    def __post_init__(self) -> None:
        for name, allowed in (('dtypes', DTYPES), ('modes', MODES), ('device', DEVICES),
                              ('stream_buffer', BUFFERS), ('stream_input', STREAM_INPUTS)):
            values = getattr(self, name)
            bad = [v for v in ([values] if isinstance(values, str) else values) if v not in allowed]
            if bad:
                raise ValueError(f'unknown {name} {bad}; allowed: {", ".join(allowed)}')
        if not (self.models and self.resolutions and self.batch_sizes and self.dtypes
                and self.modes):
            raise ValueError('models, resolutions, batch_sizes, dtypes and modes must not be '
                             'empty')
        if min(self.resolutions) < PATCH_SIZE or min(self.batch_sizes) < 1:
            raise ValueError(f'resolutions must be >= {PATCH_SIZE} and batch sizes >= 1, got '
                             f'{self.resolutions} and {self.batch_sizes}')
        if self.warmup < 0 or self.repeats < 1 or self.time_budget <= 0:
            raise ValueError(f'need warmup >= 0, repeats >= 1 and time_budget > 0, got '
                             f'{self.warmup}, {self.repeats} and {self.time_budget}')

    @property
    def timeout(self) -> float:
        """float: The hard limit per case in seconds."""
        return self.worker_timeout or max(120., 4 * self.time_budget)


def run_grid(settings: GridSettings,
             on_series_done: Optional[Callable[[List[dict]], None]] = None,
             launch: LaunchFn = launch_case,
             flop_ratio: Callable[[str], FlopRatioFn] = FlopRatio) -> List[dict]:
    """Run every case of the grid, in increasing resolution per series.

    Args:
        settings (GridSettings): The grid.
        on_series_done (Callable, optional): Called with all rows so far after each series,
            so that a long run that is interrupted keeps what it measured.
        launch (Callable): (case, timeout) -> result. Defaults to a fresh worker process.
        flop_ratio (Callable): model -> (resolution, reference) -> FLOP ratio. Defaults to
            :class:`FlopRatio`.

    Returns:
        list[dict]: One row per case: the series, ``resolution``, ``tokens``, ``status``
        ('ok', 'OOM', 'refused', 'timeout' or 'skipped'), ``note``, ``median_ms``, ``times_ms``,
        ``throughput_img_s``, ``peak_mem_mb``, ``warmup``, ``repeats``; with
        ``settings.compile`` also ``compile_s``, ``compiled_median_ms`` and
        ``compiled_over_eager`` (compiled median over eager median).
    """
    from mmlinear.utils.progress import ProgressETA
    resolutions = sorted(settings.resolutions)
    series = [(m, b, d, mode) for m in settings.models for b in settings.batch_sizes
              for d in settings.dtypes for mode in settings.modes]
    progress = ProgressETA(len(series) * len(resolutions))
    rows = []
    for model, batch, dtype, mode in series:
        planner = SeriesPlanner(settings.time_budget, settings.warmup, settings.repeats,
                                flop_ratio(model))
        for resolution in resolutions:
            row = dict(
                model=model,
                resolution=resolution,
                tokens=num_tokens(resolution),
                batch=batch,
                dtype=dtype,
                mode=mode,
                device=settings.device,
                status=OK,
                median_ms=None,
                throughput_img_s=None,
                peak_mem_mb=None,
                repeats=0,
                warmup=0,
                note='')
            step = (
                Step(run=False, note='fp16 is benchmarked on CUDA only')
                if dtype == 'fp16' and settings.device == 'cpu' else planner.plan(resolution))
            if not step.run:
                row.update(status='skipped', note=step.note)
            else:
                case = dict(
                    model=model,
                    resolution=resolution,
                    batch=batch,
                    dtype=dtype,
                    mode=mode,
                    device=settings.device,
                    warmup=step.warmup,
                    repeats=step.repeats,
                    threads=settings.threads,
                    mem_limit_gb=settings.mem_limit_gb,
                    compile=settings.compile and mode != 'streamed')
                if mode == 'streamed':
                    case.update(
                        band_rows=settings.band_rows,
                        stream_buffer=settings.stream_buffer,
                        stream_input=settings.stream_input)
                result = launch(case, settings.timeout)
                planner.record(resolution, result)
                row.update(
                    warmup=step.warmup,
                    repeats=step.repeats,
                    status=result['status'],
                    note=result.get('note', result.get('error', '')),
                    mem_method=result.get('mem_method'),
                    params=result.get('params'),
                    energy_source=result.get('energy_source'))
                if result['status'] == OK:
                    row.update(
                        median_ms=result['median_ms'],
                        times_ms=result['times_ms'],
                        peak_mem_mb=result['peak_mem_mb'],
                        throughput_img_s=batch / (result['median_ms'] / 1e3))
                    if 'energy_j_per_img' in result:
                        row['energy_j_per_img'] = result['energy_j_per_img']
                    if 'predicted_mem_mb' in result:
                        row['predicted_mem_mb'] = result['predicted_mem_mb']
                        row['band_rows'] = result['band_rows']
                    if case['compile']:
                        row.update(
                            compile_s=result['compile_s'],
                            compiled_median_ms=result['compiled_median_ms'],
                            compiled_times_ms=result['compiled_times_ms'],
                            compiled_over_eager=result['compiled_median_ms'] / result['median_ms'])
            rows.append(row)
            shown = (f'{row["median_ms"]:.1f} ms, {row["peak_mem_mb"]:.0f} MB'
                     if row['status'] == OK else f'{row["status"]} {row["note"]}')
            if row.get('energy_j_per_img') is not None:
                shown += f', {row["energy_j_per_img"]:.3g} J/img'
            if row.get('compiled_median_ms') is not None:
                shown += (f'; compiled {row["compiled_median_ms"]:.1f} ms '
                          f'({row["compiled_over_eager"]:.2f} x eager)')
            progress.step(f'{model} {resolution}px b{batch} {dtype} {mode}: {shown}')
        if on_series_done:
            on_series_done(rows)
    return rows
