"""PreemptionHook's arguments: refused with the allowed values; the handlers come and go; the
data loaders' workers ignore the signals."""
import signal
from types import SimpleNamespace

import pytest
from torch.utils.data import DataLoader

from mmlinear.engine.dataloader_workers import IgnoreSignals
from mmlinear.engine.hooks import REQUEUE_EXIT_CODE, PreemptionHook


@pytest.mark.parametrize('signals, message', [
    (['SIGKILL'], "cannot checkpoint on signal 'SIGKILL': allowed are "),
    (['SIGUSR3'], "cannot checkpoint on signal 'SIGUSR3': allowed are "),
    ('SIGTERM', 'signals must be a non-empty list of signal names'),
    ([], 'signals must be a non-empty list of signal names'),
])
def test_bad_signals_are_refused_with_the_allowed_names(signals, message):
    with pytest.raises(ValueError) as error:
        PreemptionHook(signals=signals)
    assert str(error.value).startswith(message)
    assert 'SIGTERM' in str(error.value) and 'SIGUSR1' in str(error.value)
    assert 'SIGKILL,' not in str(error.value)


@pytest.mark.parametrize('exit_code', [0, 256, '75', -1])
def test_bad_exit_codes_are_refused(exit_code):
    with pytest.raises(ValueError, match='exit_code must be an int in 1-255'):
        PreemptionHook(exit_code=exit_code)


def test_the_handlers_record_the_signal_and_are_restored_after_the_run():
    hook = PreemptionHook(signals=['SIGUSR2'])
    assert hook.exit_code == REQUEUE_EXIT_CODE == 75
    before = signal.getsignal(signal.SIGUSR2)
    hook.before_run(runner=None)
    try:
        signal.raise_signal(signal.SIGUSR2)
        assert hook.received == 'SIGUSR2'
    finally:
        hook.after_run(runner=None)
    assert signal.getsignal(signal.SIGUSR2) is before


def test_the_workers_of_the_training_and_validation_loaders_ignore_the_signals():
    loaders = [DataLoader(range(4), num_workers=2) for _ in range(2)]
    runner = SimpleNamespace(
        train_loop=SimpleNamespace(dataloader=loaders[0]),
        val_loop=SimpleNamespace(dataloader=loaders[1]))
    PreemptionHook(signals=['SIGUSR2']).before_train(runner)
    for loader in loaders:
        assert isinstance(loader.worker_init_fn, IgnoreSignals)
        assert loader.worker_init_fn.signals == ('SIGUSR2', )
    # A run without validation.
    PreemptionHook().before_train(SimpleNamespace(train_loop=runner.train_loop, val_loop=None))
