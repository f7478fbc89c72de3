"""mmlinear.utils.timing: the order in which the side-by-side loop calls, and what it
returns (no wall time is asserted)."""
from mmlinear.utils.timing import interleaved_ms


def test_interleaved_ms_alternates_the_call_order_every_round():
    calls = []
    runs = [lambda: calls.append('a'), lambda: calls.append('b')]
    times = interleaved_ms(runs, warmup=1, repeats=4)
    # Warm-up in order, then a-b, b-a, a-b, b-a: neither always runs first.
    assert ''.join(calls) == 'ab' + 'ab' + 'ba' + 'ab' + 'ba'
    assert [len(t) for t in times] == [4, 4]
    assert all(ms >= 0 for t in times for ms in t)
