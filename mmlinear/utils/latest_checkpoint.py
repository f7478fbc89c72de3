"""Resume from the newest checkpoint that can be read, not just the one the marker names.

mmengine 0.10.7's ``find_latest_checkpoint`` (what ``resume=True`` without ``load_from``, i.e.
``tools/train.py --resume`` without a path, resumes from) returns whatever
``<work_dir>/last_checkpoint`` names, so a torn or deleted file stops the run. mmlinear's writes
cannot tear (:mod:`mmlinear.utils.atomic_checkpoint`), but a file may still be damaged
afterwards, or come from a run without them. :func:`find_latest_valid_checkpoint` checks the
marker's file and, if it cannot be read, the other checkpoints of the run, newest first;
every file it skips is logged with the reason. :mod:`mmlinear.engine.upstream_shims` installs
it in place of mmengine's.
"""
import logging
import os
import os.path as osp
import re
from typing import List, Optional

import torch
from mmengine.logging import print_log

from .atomic_checkpoint import MARKER

# The names mmengine's CheckpointHook and mmlinear's PreemptionHook give checkpoints.
CHECKPOINT_NAME = re.compile(r'^(epoch|iter)_\d+\.pth$')


def checkpoint_problem(path: str) -> Optional[str]:
    """Why ``path`` cannot be resumed from, or None if it can.

    The file is opened as ``torch.load(weights_only=True, mmap=True)`` does: the archive and
    its pickle are read in full (a truncated file has lost the archive's index at its end), the
    tensors are mapped, not read.

    Args:
        path (str): A checkpoint file.

    Returns:
        str | None: The reason, e.g. ``'it does not exist'`` or the loader's error.
    """
    if not osp.isfile(path):
        return 'it does not exist'
    try:
        checkpoint = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
    except Exception as error:  # torch raises RuntimeError, EOFError or UnpicklingError
        return f'it cannot be read ({type(error).__name__}: {str(error).splitlines()[0]})'
    if not isinstance(checkpoint, dict) or 'iter' not in checkpoint.get('meta', {}):
        return 'it is not a training checkpoint (no meta.iter)'
    return None


def _candidates(work_dir: str, named: Optional[str]) -> List[str]:
    """The marker's file first, then the run's other checkpoints, newest first."""
    folders = {osp.normpath(work_dir)} | ({osp.normpath(osp.dirname(named))} if named else set())
    others = {
        osp.join(folder, name)
        for folder in folders if osp.isdir(folder)
        for name in os.listdir(folder) if CHECKPOINT_NAME.match(name)
    } - ({osp.normpath(named)} if named else set())
    return ([named] if named else []) + sorted(
        others, key=lambda p: (osp.getmtime(p), p), reverse=True)


def find_latest_valid_checkpoint(work_dir: str) -> Optional[str]:
    """The newest checkpoint of the run in ``work_dir`` that can be resumed from.

    Args:
        work_dir (str): The run's work dir.

    Returns:
        str | None: The checkpoint, or None (no checkpoint, or none readable: the run starts
        from the beginning, as mmengine's does without a marker).
    """
    marker = osp.join(work_dir, MARKER)
    named = None
    if osp.isfile(marker):
        with open(marker) as f:
            named = f.read().strip() or None
    for path in _candidates(work_dir, named):
        problem = checkpoint_problem(path)
        if problem is None:
            if path != named:
                print_log(
                    f'resuming from {path}, the newest readable checkpoint in {work_dir}',
                    logger='current',
                    level=logging.WARNING)
            return path
        print_log(f'skipping checkpoint {path}: {problem}', logger='current', level=logging.WARNING)
    print_log(
        f'no checkpoint to resume from in {work_dir}: training starts from the beginning',
        logger='current',
        level=logging.WARNING)
    return None


__all__ = ['checkpoint_problem', 'find_latest_valid_checkpoint']
