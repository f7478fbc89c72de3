"""Preemption-safe training: on a signal, checkpoint at the current iteration and exit for a
requeue."""
import signal
import threading
from typing import Dict, Optional, Sequence

import torch
import torch.distributed as torch_dist
from mmengine.dist import all_reduce, barrier, get_dist_info, is_main_process
from mmengine.fileio import join_path
from mmengine.hooks import CheckpointHook, Hook

from mmlinear.engine.dataloader_workers import ignore_signals_in_workers, shut_down_workers
from mmlinear.registry import HOOKS
from mmlinear.utils.atomic_checkpoint import write_last_checkpoint

#: The exit status after a preemption checkpoint: EX_TEMPFAIL of sysexits.h ("temporary
#: failure; the user is invited to retry"), distinct from success (0), errors (1, 2) and deaths
#: by a signal (128 + N). ``tools/slurm_train.sh`` requeues the job on it.
REQUEUE_EXIT_CODE = 75
# Signals that cannot be caught.
_UNCATCHABLE = ('SIGKILL', 'SIGSTOP')


def _check_signals(signals: Sequence[str]) -> tuple:
    """The signal names, checked.

    Args:
        signals (Sequence[str]): Names such as ``'SIGTERM'``.

    Returns:
        tuple[str]: The names.

    Raises:
        ValueError: For a name that is not a signal or cannot be caught, or an empty list;
            the message lists the allowed names.
    """
    allowed = sorted(s.name for s in signal.Signals if s.name not in _UNCATCHABLE)
    if isinstance(signals, str) or not signals:
        raise ValueError(f'signals must be a non-empty list of signal names, got {signals!r}; '
                         f'allowed: {", ".join(allowed)}')
    for name in signals:
        if name not in allowed:
            raise ValueError(f'cannot checkpoint on signal {name!r}: allowed are '
                             f'{", ".join(allowed)}')
    return tuple(signals)


@HOOKS.register_module()
class PreemptionHook(Hook):
    """On a signal, finish the current iteration, checkpoint it and exit with a requeue status.

    Schedulers warn a job before they stop it: slurm sends SIGTERM when it preempts a job or
    its time is up (and SIGKILL some seconds later), and a signal chosen with
    ``--signal=USR1@<seconds>`` that long before the time limit. The handler only records the
    signal; after the current training iteration, all ranks agree (a max all-reduce of the flag,
    so a signal to any rank stops them all), rank 0 writes ``iter_<n>.pth`` through
    ``runner.save_checkpoint`` (the normal layout, atomically, with the random states and the
    position in the epoch, :mod:`mmlinear.engine.exact_resume`) and points ``last_checkpoint``
    at it, and every rank exits with ``exit_code``. ``tools/train.py --resume`` (no path) then
    continues from that iteration.

    Schedulers and ``timeout`` signal every process of the job, so the data loaders' workers
    (training and validation) ignore the signals: they go on loading until the checkpoint is
    written, then the main process shuts them down
    (:mod:`mmlinear.engine.dataloader_workers`).

    Switch it on with ``tools/train.py --preemptible`` or in a config:
    ``default_hooks = dict(preemption=dict(type='mmlinear.PreemptionHook'))``.

    Args:
        signals (Sequence[str]): Signal names to checkpoint on. Defaults to
            ``('SIGTERM', 'SIGUSR1')``.
        exit_code (int): Exit status after the checkpoint, 1-255. Defaults to
            :data:`REQUEUE_EXIT_CODE` (75).
    """

    priority = 'LOWEST'  # after every other hook's after_train_iter (schedulers, EMA, logs)

    def __init__(self,
                 signals: Sequence[str] = ('SIGTERM', 'SIGUSR1'),
                 exit_code: int = REQUEUE_EXIT_CODE) -> None:
        self.signals = _check_signals(signals)
        if not isinstance(exit_code, int) or not 1 <= exit_code <= 255:
            raise ValueError(f'exit_code must be an int in 1-255 (0 would tell the scheduler '
                             f'that training finished), got {exit_code!r}')
        self.exit_code = exit_code
        self.received: Optional[str] = None
        self._previous: Dict[int, object] = {}

    def _record(self, signum: int, frame) -> None:
        # Only record: the iteration in progress finishes first, and a handler must not write.
        self.received = signal.Signals(signum).name

    def before_run(self, runner) -> None:
        """Install the signal handlers (the main thread only may)."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError('PreemptionHook needs the training loop in the main thread '
                               '(Python runs signal handlers there only)')
        for name in self.signals:
            signum = signal.Signals[name].value
            self._previous[signum] = signal.signal(signum, self._record)

    @staticmethod
    def _loaders(runner) -> list:
        # The loops are built by the time a training run calls before_train.
        return [loop.dataloader for loop in (runner.train_loop, runner.val_loop) if loop]

    def before_train(self, runner) -> None:
        """Make the workers of the training and validation loaders ignore the signals (the
        loaders exist now and have started no worker yet)."""
        for loader in self._loaders(runner):
            ignore_signals_in_workers(loader, self.signals)

    def _restore_handlers(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def after_run(self, runner) -> None:
        self._restore_handlers()

    def _any_rank_received(self) -> bool:
        flag = torch.tensor([int(self.received is not None)])
        if get_dist_info()[1] > 1:
            all_reduce(flag, op='max')
        return bool(flag.item())

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        """Checkpoint and exit if any rank has received one of the signals."""
        if not self._any_rank_received():
            return
        step = runner.iter + 1
        checkpoint_hook = next((h for h in runner.hooks if isinstance(h, CheckpointHook)), None)
        out_dir = getattr(checkpoint_hook, 'out_dir', None) or runner.work_dir
        runner.logger.info(f'{self.received or "a signal to another rank"}: saving a checkpoint '
                           f'at iteration {step} and exiting with status {self.exit_code} '
                           '(resume with --resume)')
        filename = f'iter_{step}.pth'
        # Every rank calls it (it gathers the random states), rank 0 writes.
        runner.save_checkpoint(out_dir, filename, by_epoch=False)
        if is_main_process():
            write_last_checkpoint(runner.work_dir, join_path(out_dir, filename))
        # Before the handlers go: a second signal meanwhile is only recorded.
        for loader in self._loaders(runner):
            shut_down_workers(loader)
        self._restore_handlers()
        if torch_dist.is_available() and torch_dist.is_initialized():
            # No rank may leave before rank 0 has written: a launcher stops the others when
            # one exits. Then close the group, which an exiting interpreter may abort.
            barrier()
            torch_dist.destroy_process_group()
        raise SystemExit(self.exit_code)
