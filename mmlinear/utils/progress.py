"""One log line per finished step of a long measurement loop: its result, elapsed time, ETA.

The analysis tools (benchmarks, sweeps, FLOPs tables, saliency) report each measurement as it
finishes, and a long run's output is often kept in a log file. That is a line per step with
a message, which neither progress bar of the stack gives: mmengine's ``ProgressBar`` rewrites
one line in place (with a carriage return) and takes no message, and a rich bar is a live
display that a file receives only once, at the end (rich draws it only on a terminal).
The streamed runs, whose steps are bands with nothing to report, use rich's bar
(:class:`mmlinear.models.streaming.band_progress.BandProgress`). The ETA is mmengine's: the mean
time per finished step times the steps left.
"""
import time
from typing import Callable, Optional


class ProgressETA:
    """Prints ``[done/total] message (elapsed, ETA)`` lines.

    The ETA assumes the remaining steps cost what the finished ones cost on average.

    Args:
        total (int): Number of steps.
        printer (Callable[[str], None], optional): Where lines go. Defaults to ``print`` with
            flush.
        clock (Callable[[], float]): Seconds on a monotonic scale. Defaults to
            ``time.monotonic``; a test can pass its own to fix the elapsed time.
    """

    def __init__(self,
                 total: int,
                 printer: Optional[Callable[[str], None]] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if total < 0:
            raise ValueError(f'total must be >= 0, got {total}')
        self.total = total
        self.done = 0
        self.clock = clock
        self.start = clock()
        self.printer = printer or (lambda line: print(line, flush=True))

    @property
    def elapsed(self) -> float:
        """float: Seconds since construction."""
        return self.clock() - self.start

    def eta(self) -> float:
        """float: Estimated seconds left, from the mean time per finished step (nan before
        the first)."""
        if self.done == 0:
            return float('nan')
        return self.elapsed / self.done * (self.total - self.done)

    def step(self, message: str) -> str:
        """Count one finished step and print its line.

        Args:
            message (str): What was done.

        Returns:
            str: The printed line.
        """
        self.done += 1
        line = (f'[{self.done}/{self.total}] {message}  '
                f'(elapsed {self.elapsed:.0f} s, ETA {self.eta():.0f} s)')
        self.printer(line)
        return line
