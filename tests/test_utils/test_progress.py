import pytest

from mmlinear.utils.progress import ProgressETA


class FakeClock:
    """A clock that moves only when told, so that the test does not depend on how fast the
    machine runs it."""

    def __init__(self) -> None:
        self.now = 1000.

    def __call__(self) -> float:
        return self.now


def test_progress_lines_count_and_estimate():
    assert ProgressETA(3).eta() != ProgressETA(3).eta()  # nan before the first step
    lines, clock = [], FakeClock()
    progress = ProgressETA(4, printer=lines.append, clock=clock)
    clock.now += 3
    progress.step('first')
    clock.now += 1
    progress.step('second')
    assert lines == ['[1/4] first  (elapsed 3 s, ETA 9 s)', '[2/4] second  (elapsed 4 s, ETA 4 s)']
    clock.now += 6.  # the two steps took 10 s: the 2 left take as long
    assert progress.eta() == 10.
    with pytest.raises(ValueError, match='total must be >= 0'):
        ProgressETA(-1)
