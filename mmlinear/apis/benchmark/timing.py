"""Wall-clock timing of a callable: the one loop every benchmark of mmlinear times with."""
import statistics
import time
from typing import Callable, List


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
