"""A progress printer with elapsed time and ETA for long measurement loops."""
import time
from typing import Callable, Optional


class ProgressETA:
    """Prints ``[done/total] message (elapsed, ETA)`` lines.

    The ETA assumes the remaining steps cost what the finished ones cost on average, unless a
    better estimate of the remaining seconds is given to :meth:`step`.

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

    def step(self, message: str, remaining_seconds: Optional[float] = None) -> str:
        """Count one finished step and print its line.

        Args:
            message (str): What was done.
            remaining_seconds (float, optional): An estimate of the time left that overrides
                the mean-time ETA.

        Returns:
            str: The printed line.
        """
        self.done += 1
        eta = self.eta() if remaining_seconds is None else remaining_seconds
        line = (f'[{self.done}/{self.total}] {message}  '
                f'(elapsed {self.elapsed:.0f} s, ETA {eta:.0f} s)')
        self.printer(line)
        return line
