"""Wall-clock timing of a callable: the one loop every benchmark of mmlinear times with.

It needs the standard library alone, so that `tools/analysis_tools/benchmark_ops.py` runs
where only torch is installed (the bare image of `tools/gpu_check.sh`)."""
import statistics
import time
from typing import Callable, List, Sequence


def time_ms(run: Callable[[], object], warmup: int, repeats: int) -> List[float]:
    """Milliseconds of each of ``repeats`` calls of ``run``, after ``warmup`` untimed calls.

    Args:
        run (Callable): What to time (a model call, an ONNX Runtime session run, ...).
        warmup (int): Untimed calls first (allocator, caches, lazy initialisation).
        repeats (int): Timed calls.

    Returns:
        list[float]: ``repeats`` wall times in milliseconds, in call order.
    """
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def median_ms(run: Callable[[], object], warmup: int, repeats: int) -> float:
    """The median of :func:`time_ms`: milliseconds per call of ``run``."""
    return statistics.median(time_ms(run, warmup, repeats))


def interleaved_ms(runs: Sequence[Callable[[], object]], warmup: int,
                   repeats: int) -> List[List[float]]:
    """Time several callables side by side: one call of each per round, in turn.

    Comparing two implementations on a shared machine, the load changes during a
    measurement; timing them in alternation exposes both to the same load. The order of the
    calls is reversed every other round so that neither always runs first (warm caches,
    a frequency step of the previous call).

    Args:
        runs (Sequence[Callable]): What to time, e.g. two models' forward on one input.
        warmup (int): Untimed rounds first.
        repeats (int): Timed rounds.

    Returns:
        list[list[float]]: For each callable, ``repeats`` wall times in milliseconds, in
        round order.
    """
    for _ in range(warmup):
        for run in runs:
            run()
    times: List[List[float]] = [[] for _ in runs]
    for round_index in range(repeats):
        order = range(len(runs)) if round_index % 2 == 0 else reversed(range(len(runs)))
        for index in order:
            times[index].extend(time_ms(runs[index], 0, 1))
    return times
