"""Safe loading of mmengine checkpoints under ``torch.load(weights_only=True)``.

mmengine 0.10.7 calls ``torch.load`` without ``weights_only``; since torch 2.6 that means
``weights_only=True``, which refuses its own checkpoints because they pickle the message hub.
Turning ``weights_only`` off (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``) would let any checkpoint
run code when loaded, so instead we allowlist exactly the globals that mmengine checkpoints
hold (checked with ``torch.serialization.get_unsafe_globals_in_checkpoint``):

- ``mmengine.logging.history_buffer.HistoryBuffer``;
- numpy's array and scalar reconstruction helpers, ``ndarray``, ``dtype`` and the concrete dtype
  classes;
- ``mmengine.optim.scheduler.param_scheduler.OneCycleParamScheduler``, whose saved state holds
  its annealing function;
- ``builtins.getattr``, which the pickle uses to restore those functions:
  ``getattr(HistoryBuffer, 'min')`` for the buffers' table of statistic methods and
  ``getattr(OneCycleParamScheduler, '_annealing_cos')``. A general ``getattr`` would allow a
  classic sandbox escape through ``__class__`` / ``__subclasses__``, so it is replaced by a
  getattr that only returns the public methods of HistoryBuffer and the two annealing functions
  of OneCycleParamScheduler.

Anything else in a checkpoint is still refused by torch's weights-only unpickler.
"""
import pickle
from typing import Any, Callable, List, Tuple, Union

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.optim.scheduler.param_scheduler import OneCycleParamScheduler

_registered = False
_ONE_CYCLE_ANNEALING = ('_annealing_cos', '_annealing_linear')


def checkpoint_getattr(obj: Any, name: str) -> Any:
    """Restricted ``getattr`` used in place of ``builtins.getattr`` while unpickling.

    Args:
        obj: The object whose attribute the pickle asks for.
        name (str): The attribute name.

    Returns:
        A public method of :class:`HistoryBuffer` (class or instance), or an annealing function
        of :class:`OneCycleParamScheduler`.

    Raises:
        pickle.UnpicklingError: For any other object or attribute.
    """
    if isinstance(name, str):
        is_history_buffer = obj is HistoryBuffer or isinstance(obj, HistoryBuffer)
        if (is_history_buffer and not name.startswith('_')
                and callable(getattr(HistoryBuffer, name, None))):
            return getattr(obj, name)
        is_one_cycle = obj is OneCycleParamScheduler or isinstance(obj, OneCycleParamScheduler)
        if is_one_cycle and name in _ONE_CYCLE_ANNEALING:
            return getattr(obj, name)
    raise pickle.UnpicklingError(
        f'refusing getattr({obj!r:.60}, {name!r:.60}) in a checkpoint: only the public '
        'methods of mmengine HistoryBuffer and the annealing functions of '
        'OneCycleParamScheduler may be restored')


def _numpy_globals() -> List[Union[Callable, Tuple[Callable, str]]]:
    """numpy's reconstruction helpers under every module path a pickle may name."""
    safe: List[Union[Callable, Tuple[Callable, str]]] = [np.ndarray, np.dtype]
    multiarray = np.core.multiarray if not hasattr(np, '_core') else np._core.multiarray
    for name in ('_reconstruct', 'scalar'):
        fn = getattr(multiarray, name)
        # numpy 2 pickles as numpy._core.*, numpy 1 as numpy.core.*; accept both spellings.
        safe += [(fn, f'numpy._core.multiarray.{name}'),
                 (fn, f'numpy.core.multiarray.{name}')]
    dtypes = getattr(np, 'dtypes', None)
    if dtypes is not None:
        safe += [cls for cls in vars(dtypes).values()
                 if isinstance(cls, type) and issubclass(cls, np.dtype)]
    return safe


def register_safe_checkpoint_globals() -> None:
    """Allowlist the globals of mmengine checkpoints for weights-only loading (idempotent)."""
    global _registered
    if _registered:
        return
    torch.serialization.add_safe_globals(
        [HistoryBuffer, OneCycleParamScheduler, (checkpoint_getattr, 'builtins.getattr')]
        + _numpy_globals())
    _registered = True


__all__ = ['checkpoint_getattr', 'register_safe_checkpoint_globals']
