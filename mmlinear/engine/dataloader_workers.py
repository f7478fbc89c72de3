"""Data-loading workers that leave the preemption signals to the main process.

Slurm (on preemption, and with ``--signal``), ``timeout`` and a kill of a process group signal
every process of a job, the data loader's workers included. torch's workers die of SIGTERM
from anyone but their parent, and of SIGUSR1 under its default action; the main process then
stops with ``RuntimeError: DataLoader worker (pid ...) is killed by signal`` before the
:class:`~mmlinear.engine.hooks.PreemptionHook` can checkpoint. A worker has nothing to save,
so it ignores those signals (:class:`IgnoreSignals`, run first in each worker) and keeps
loading until the main process has checkpointed and shuts it down
(:func:`shut_down_workers`).
"""
import signal
from typing import Callable, Optional, Sequence

from torch.utils.data import DataLoader


class IgnoreSignals:
    """A data loader's ``worker_init_fn``: ignore ``signals``, then call ``then`` (the loader's
    own ``worker_init_fn``, e.g. mmengine's seeding). A class, not a closure: the function
    travels to the worker pickled when workers are spawned rather than forked.

    Args:
        signals (Sequence[str]): Signal names, such as ``'SIGTERM'``.
        then (Callable[[int], None], optional): Called next with the worker id.
    """

    def __init__(self, signals: Sequence[str], then: Optional[Callable[[int], None]]) -> None:
        self.signals = tuple(signals)
        self.then = then

    def __call__(self, worker_id: int) -> None:
        for name in self.signals:
            signal.signal(signal.Signals[name], signal.SIG_IGN)
        if self.then is not None:
            self.then(worker_id)


def ignore_signals_in_workers(loader, signals: Sequence[str]) -> None:
    """Make the workers that ``loader`` starts from now on ignore ``signals``.

    Args:
        loader (DataLoader | Iterable): A data loader; anything else (a loader without
            worker processes of torch's) is left as it is.
        signals (Sequence[str]): Signal names.
    """
    if not isinstance(loader, DataLoader) or isinstance(loader.worker_init_fn, IgnoreSignals):
        return
    loader.worker_init_fn = IgnoreSignals(signals, loader.worker_init_fn)


def shut_down_workers(loader) -> None:
    """Stop the persistent workers of ``loader``, the way torch stops them at the end of a
    run: each is told to finish and joined.

    A worker that ignores SIGTERM outlives ``Process.terminate``, which is how Python's exit
    stops the workers of a loader still alive then (persistent workers live as long as their
    loader): without this, the exit would wait for them for ever. The workers of a loader that
    is not persistent belong to the epoch's iterator and stop when it is dropped.

    Args:
        loader (DataLoader | Iterable): A data loader; anything else is left as it is.
    """
    # torch keeps the persistent workers' iterator in DataLoader._iterator and offers no public
    # way to stop them but dropping the loader.
    iterator = getattr(loader, '_iterator', None) if isinstance(loader, DataLoader) else None
    if iterator is not None and hasattr(iterator, '_shutdown_workers'):
        iterator._shutdown_workers()
        loader._iterator = None


__all__ = ['IgnoreSignals', 'ignore_signals_in_workers', 'shut_down_workers']
