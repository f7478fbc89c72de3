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

Anything else in a checkpoint is still refused by torch's weights-only unpickler. Local files
are read through :func:`load_checkpoint_file`, which mmengine's ``CheckpointLoader`` uses for
plain paths (``--resume``, ``load_from``, ``init_cfg=dict(type='Pretrained')``,
``tools/test.py``) and the converters call: its refusal names the file and what it holds,
instead of torch's advice to switch ``weights_only`` off.
"""
import os.path as osp
import pickle
import re
from typing import Any, Callable, List, Optional, Tuple, Union

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.optim.scheduler.param_scheduler import OneCycleParamScheduler

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
        safe += [(fn, f'numpy._core.multiarray.{name}'), (fn, f'numpy.core.multiarray.{name}')]
    dtypes = getattr(np, 'dtypes', None)
    if dtypes is not None:
        safe += [
            cls for cls in vars(dtypes).values()
            if isinstance(cls, type) and issubclass(cls, np.dtype)
        ]
    return safe


def _unpickler_reason(error: pickle.UnpicklingError) -> str:
    """The part of torch's weights-only error that says what failed (torch wraps it in advice
    to turn ``weights_only`` off, which does not apply here)."""
    found = re.search(r'WeightsUnpickler error:\s*(.+?)(?:\n\s*\n|$)', str(error), re.S)
    return (found.group(1) if found else str(error)).strip()


def load_checkpoint_file(filename: str, map_location: Optional[Any] = None) -> Any:
    """Load a local checkpoint with ``torch.load(weights_only=True)``.

    Args:
        filename (str): Path of the file (``~`` is expanded).
        map_location: As for :func:`torch.load`.

    Returns:
        The unpickled checkpoint (tensors, containers and the allowlisted mmengine types).

    Raises:
        FileNotFoundError: If the file does not exist.
        pickle.UnpicklingError: If the file holds anything else (nothing of it has run), or
            is not a file of ``torch.save`` (empty, truncated, another format).
    """
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'checkpoint not found: {filename}')
    try:
        return torch.load(filename, map_location=map_location, weights_only=True)
    except EOFError:
        raise pickle.UnpicklingError(f'cannot read checkpoint {filename}: the file is empty or '
                                     'truncated') from None
    except pickle.UnpicklingError as error:
        reason = _unpickler_reason(error)
        found = re.search(r'Unsupported global: GLOBAL (\S+)', reason)
        if found:
            what = f'the global {found.group(1)}'
        elif reason.startswith('refusing getattr'):  # from checkpoint_getattr
            what = reason
        else:
            # Not a refused object but a file that torch.save did not write (or a damaged
            # one): the unpickler stops at the first byte it cannot parse.
            raise pickle.UnpicklingError(
                f'cannot read checkpoint {filename}: it is not a file written by torch.save '
                f'or it is damaged ({reason})') from None
        raise pickle.UnpicklingError(
            f'refusing to load checkpoint {filename}: it holds {what}, which a checkpoint '
            'may not contain (mmlinear loads with torch.load(weights_only=True) and allows '
            'tensors, containers and the types of mmengine checkpoints only). Do not load '
            'this file unless you trust where it came from.') from None


def safe_checkpoint_globals() -> List[Union[Callable, Tuple[Callable, str]]]:
    """The globals of mmengine checkpoints that weights-only loading may restore, as
    ``torch.serialization.add_safe_globals`` takes them (installed by
    :mod:`mmlinear.engine.upstream_shims`)."""
    return [HistoryBuffer, OneCycleParamScheduler,
            (checkpoint_getattr, 'builtins.getattr')] + _numpy_globals()


__all__ = ['checkpoint_getattr', 'load_checkpoint_file', 'safe_checkpoint_globals']
