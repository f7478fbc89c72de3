"""Iteration-exact resumption: every random generator and the position inside an epoch.

mmengine 0.10.7 restores the model, optimizer (with an AMP loss scaler), parameter schedulers,
message hub and the hooks' own checkpoint state, but

- not the random generators (Python, numpy, torch, CUDA): a resumed run draws other
  augmentations, dropout and drop-path masks than the run it continues;
- not the position inside an epoch: ``EpochBasedTrainLoop`` restarts the epoch of a checkpoint
  written mid-epoch (a preemption checkpoint, or ``CheckpointHook(by_epoch=False)``) from its
  first batch, training the batches before the checkpoint twice.

:mod:`mmlinear.engine.upstream_shims` installs, process-wide:

- ``Runner.save_checkpoint`` records every rank's generator states (gathered from all ranks:
  mmengine calls it on every rank and writes on rank 0 only) and the number of batches per
  epoch in the message hub, which the checkpoint saves and ``Runner.resume`` restores;
- ``Runner.resume`` hands them to the train loop as a pending :class:`ResumePoint`;
- ``Runner.build_train_loop`` seeds each training sample's random draws from the seed, the
  epoch and the sample's place in it (:mod:`mmlinear.engine.sample_seeding`): data-loading
  workers keep their generators in their own processes, which no checkpoint can restore;
- ``EpochBasedTrainLoop.run_epoch`` skips the batches of the interrupted epoch that were
  already trained (it fetches and drops them, so the sampler and the batches' order are the
  uninterrupted run's) and ``IterBasedTrainLoop``'s iterator, which mmengine already advances
  past the trained batches, is wrapped; both restore the generator states just before the
  first batch that is trained again.

The states are restored where the uninterrupted run stood when the checkpoint was written.
That is where it stood before its next batch, and so bit-exact, unless a validation runs
between the checkpoint and the next training batch (after an epoch checkpoint, or at an
iteration checkpoint's iteration): its data loader draws its seed from torch's generator, and
the resumed run does not repeat that validation.
"""
import logging
import random
from typing import Any, Callable, List, Optional

import numpy as np
import torch
from mmengine.dist import all_gather_object, get_dist_info
from mmengine.logging import print_log
from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop, Runner

from .sample_seeding import seed_each_sample

#: The message hub key of the states saved with a checkpoint.
RESUME_STATE_KEY = 'mmlinear_resume_state'

# mmengine's own methods, which the replacements call; taken before the shim replaces them (the
# shim imports this module first).
_upstream_save_checkpoint = Runner.save_checkpoint
_upstream_resume = Runner.resume
_upstream_build_train_loop = Runner.build_train_loop


def capture_rng_state() -> dict:
    """This process's random generator states, as types the weights-only loader accepts.

    Returns:
        dict: ``python`` (the ``random`` state as lists), ``numpy`` (the legacy global
        generator: keys as an int64 tensor, position and the cached Gaussian), ``torch`` (the
        CPU generator, a uint8 tensor) and ``cuda`` (one state per device, when CUDA is
        initialised).
    """
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = dict(
        python=[version, list(internal), gauss],
        numpy=dict(
            name=name,
            keys=torch.from_numpy(keys.astype(np.int64)),
            pos=int(pos),
            has_gauss=int(has_gauss),
            cached_gaussian=float(cached)),
        torch=torch.get_rng_state())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    """Set this process's generators to what :func:`capture_rng_state` returned.

    Args:
        state (dict): The captured states.
    """
    version, internal, gauss = state['python']
    random.setstate((version, tuple(internal), gauss))
    numpy_state = state['numpy']
    np.random.set_state(
        (numpy_state['name'], numpy_state['keys'].numpy().astype(np.uint32), numpy_state['pos'],
         numpy_state['has_gauss'], numpy_state['cached_gaussian']))
    torch.set_rng_state(state['torch'])
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state['cuda'])


class ResumePoint:
    """What a resumed train loop does before its first batch: skip, then restore the RNGs.

    Args:
        rng_states (list[dict]): One :func:`capture_rng_state` per rank of the saved run.
        batches_per_epoch (int, optional): ``len(train_dataloader)`` of the saved run (None
            for a loader without a length).
    """

    def __init__(self, rng_states: List[dict], batches_per_epoch: Optional[int]) -> None:
        self.rng_states = rng_states
        self.batches_per_epoch = batches_per_epoch

    def restore_rng(self) -> None:
        """Restore this rank's generators, if the saved run had as many ranks."""
        rank, world_size = get_dist_info()
        if len(self.rng_states) != world_size:
            print_log(
                f'the checkpoint holds the random states of {len(self.rng_states)} '
                f'process(es), this run has {world_size}: they are not restored, so the '
                'resumed run draws other random numbers than the saved one would have',
                logger='current',
                level=logging.WARNING)
            return
        restore_rng_state(self.rng_states[rank])

    def batches_to_skip(self, loop: EpochBasedTrainLoop) -> int:
        """How many batches of the current epoch the saved run had trained.

        Args:
            loop (EpochBasedTrainLoop): The resumed loop (its ``iter`` and ``epoch`` are the
                checkpoint's).

        Returns:
            int: 0 at an epoch boundary, or when the epoch's length changed (then the epoch
            restarts, as in mmengine, with a warning).
        """
        saved = self.batches_per_epoch
        done = loop.iter - loop.epoch * saved if saved is not None else 0
        if len(loop.dataloader) != saved:
            if done:
                print_log(
                    f'the checkpoint was written after {done} of the {saved} '
                    f'batches of epoch {loop.epoch + 1}, but an epoch now has '
                    f'{len(loop.dataloader)} (another batch size or number of processes): '
                    'the epoch restarts from its first batch',
                    logger='current',
                    level=logging.WARNING)
            return 0
        return done


class _RestoreBeforeBatch:
    """An iterator that restores the generators before handing out batch number ``index``
    (0-based) and passes everything else through."""

    def __init__(self, iterator, index: int, restore: Callable[[], None]) -> None:
        self._wrapped = iterator
        self._remaining = index
        self._restore: Optional[Callable[[], None]] = restore

    def __iter__(self):
        return self

    def __next__(self):
        if self._restore is not None and self._remaining == 0:
            restore, self._restore = self._restore, None
            restore()
        self._remaining -= 1
        return next(self._wrapped)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)


def save_checkpoint(self: Runner, *args, **kwargs) -> None:
    """``Runner.save_checkpoint``, first recording the states of every rank (a collective:
    call it on every rank, as mmengine's hooks do)."""
    states = [capture_rng_state()]
    if get_dist_info()[1] > 1:
        states = all_gather_object(states[0])
    try:
        batches_per_epoch = len(self.train_dataloader)
    except TypeError:  # an iterable dataset without a length (iteration-based loops only)
        batches_per_epoch = None
    self.message_hub.update_info(RESUME_STATE_KEY,
                                 dict(rng=states, batches_per_epoch=batches_per_epoch))
    _upstream_save_checkpoint(self, *args, **kwargs)


def resume(self: Runner, *args, **kwargs) -> None:
    """``Runner.resume``, then hand the saved states to the train loop."""
    _upstream_resume(self, *args, **kwargs)
    saved = self.message_hub.get_info(RESUME_STATE_KEY)
    if saved is None:
        self.logger.warning('the checkpoint holds no random states (it was written without '
                            'mmlinear): the resumed run draws other random numbers')
        return
    point = ResumePoint(saved['rng'], saved['batches_per_epoch'])
    loop = self.train_loop
    if isinstance(loop, IterBasedTrainLoop):
        # mmengine's run() fetches and drops the `iter` trained batches, then trains.
        loop.dataloader_iterator = _RestoreBeforeBatch(loop.dataloader_iterator, loop.iter,
                                                       point.restore_rng)
    else:
        loop._mmlinear_resume_point = point


def build_train_loop(self: Runner, loop):
    """``Runner.build_train_loop``, with each sample of the train loader it builds seeded
    from the seed, the epoch and its place in the epoch."""
    if isinstance(loop, dict):
        self._train_dataloader = seed_each_sample(self._train_dataloader)
    return _upstream_build_train_loop(self, loop)


def run_epoch(self: EpochBasedTrainLoop) -> None:
    """``EpochBasedTrainLoop.run_epoch`` of mmengine 0.10.7, continuing an interrupted epoch
    after the batches it had trained."""
    point: Optional[ResumePoint] = self.__dict__.pop('_mmlinear_resume_point', None)
    skip = point.batches_to_skip(self) if point is not None else 0
    if point is not None and not skip:
        # At an epoch boundary the saved run's next draws are the next epoch's set-up.
        point.restore_rng()
    self.runner.call_hook('before_train_epoch')
    self.runner.model.train()
    batches = iter(self.dataloader)
    if skip:
        print_log(
            f'skipping the {skip} batches of epoch {self.epoch + 1} trained before the '
            'checkpoint',
            logger='current',
            level=logging.INFO)
        for _ in range(skip):
            next(batches)
        point.restore_rng()
    for idx, data_batch in enumerate(batches, start=skip):
        self.run_iter(idx, data_batch)
    self.runner.call_hook('after_train_epoch')
    self._epoch += 1


__all__ = [
    'RESUME_STATE_KEY', 'ResumePoint', 'build_train_loop', 'capture_rng_state', 'restore_rng_state',
    'resume', 'run_epoch', 'save_checkpoint'
]
