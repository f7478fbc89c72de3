"""The progress bar of a streamed run: steps done (patch rows, head bands), elapsed time, ETA."""
import time
from typing import Callable, Optional

from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

#: Seconds after which a run with ``progress=None`` starts showing its bar.
SHOW_AFTER_S = 3.0


class BandProgress:
    """A rich progress bar over the steps of a streamed run.

    A streamed backbone counts patch rows: every pass of a layer over the image adds the
    grid's rows band by band, so the bar and its ETA move within a layer, not once per layer.
    The streamed decode head counts its bands.

    Args:
        total (int): Steps.
        enabled (bool, optional): True always shows the bar, False never; None shows it once
            the run has taken :data:`SHOW_AFTER_S` seconds, so short runs print nothing.
        clock (Callable[[], float]): Seconds on a monotonic scale. Defaults to
            ``time.monotonic``.
        label (str): What the bar counts the steps of. Defaults to 'streamed forward'.
    """

    def __init__(self,
                 total: int,
                 enabled: Optional[bool] = None,
                 clock: Callable[[], float] = time.monotonic,
                 label: str = 'streamed forward') -> None:
        self.total = total
        self.label = label
        self.enabled = enabled
        self.done = 0
        self.description = ''
        self.clock = clock
        self.start = clock()
        self._bar: Optional[Progress] = None
        self._task = None

    def __enter__(self) -> 'BandProgress':
        if self.enabled:
            self._show()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._bar is not None:
            self._bar.stop()

    def _show(self) -> None:
        self._bar = Progress(
            TextColumn(f'{self.label}: {{task.description}}'), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TimeRemainingColumn())
        self._task = self._bar.add_task(self.description, total=self.total, completed=self.done)
        self._bar.start()

    def describe(self, description: str) -> None:
        """Name the part that runs now (shown beside the bar)."""
        self.description = description
        self._refresh()

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` finished steps."""
        self.done += steps
        self._refresh()

    def _refresh(self) -> None:
        if self._bar is None and self.enabled is None and \
                self.clock() - self.start >= SHOW_AFTER_S:
            self._show()
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, description=self.description)
