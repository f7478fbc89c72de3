"""Helpers shared by the converters of released checkpoints (tools/model_converters)."""
import os.path as osp
import pickle
import re
from typing import Dict, Iterable, Mapping, Sequence

import torch
from torch import Tensor

from .safe_checkpoint import load_checkpoint_file

#: Extensions of files written by ``torch.save`` that the converters read.
TORCH_EXTS = ('.pth', '.pt', '.bin', '.ckpt')
# What a converter reports as a one-line error (exit 1) instead of a traceback: a missing or
# unreadable source, one the weights-only loader refuses (e.g. a training checkpoint that also
# pickles its config object), a foreign key layout, a missing optional reader (safetensors).
CONVERSION_ERRORS = (FileNotFoundError, ValueError, ImportError, pickle.UnpicklingError)


def load_torch_checkpoint(path: str) -> object:
    """Read a file saved with ``torch.save``, safely (``weights_only=True``, see
    :func:`load_checkpoint_file`).

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        pickle.UnpicklingError: If the file holds anything but tensors, containers and the
            types of mmengine checkpoints.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'source checkpoint not found: {path}')
    return load_checkpoint_file(path, map_location='cpu')


def load_safetensors_file(path: str) -> Dict[str, Tensor]:
    """Read a Hugging Face ``.safetensors`` file onto the CPU.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ImportError: If the safetensors package is not installed.
        ValueError: If the file is not a valid safetensors file.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'source checkpoint not found: {path}')
    try:
        from safetensors import SafetensorError
        from safetensors.torch import load_file
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError('reading .safetensors needs the safetensors package '
                          '(pip install safetensors)') from e
    try:
        return load_file(path, device='cpu')
    except SafetensorError as e:
        raise ValueError(f'cannot read {path} as a .safetensors file: {e}') from e


def load_state_dict_file(path: str, wrappers: Sequence[str]) -> Dict[str, Tensor]:
    """The state dict in a ``.safetensors`` file or a file of ``torch.save``, by extension.

    Args:
        path (str): The file: ``.safetensors`` or one of ``TORCH_EXTS``.
        wrappers (Sequence[str]): Where a torch file may nest the state dict (see
            :func:`find_state_dict`).

    Returns:
        dict[str, Tensor]: The state dict.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: For another extension, or a file without a state dict of tensors.
        pickle.UnpicklingError: If a torch file holds other objects or is not a torch file.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'source checkpoint not found: {path}')
    ext = osp.splitext(path)[1].lower()
    if ext == '.safetensors':
        return load_safetensors_file(path)
    if ext in TORCH_EXTS:
        return find_state_dict(load_torch_checkpoint(path), wrappers, path)
    raise ValueError(f'unknown checkpoint extension {ext!r} of {path}; expected .safetensors '
                     f'or one of {", ".join(TORCH_EXTS)}')


def find_state_dict(checkpoint: object, wrappers: Sequence[str], path: str) -> Dict[str, Tensor]:
    """The state dict inside a loaded checkpoint.

    Args:
        checkpoint: What :func:`load_torch_checkpoint` returned.
        wrappers (Sequence[str]): Keys under which training scripts nest the state dict
            (``'model'``, ``'state_dict'``, ``'student'``); the first one present is taken.
            A plain state dict needs none.
        path (str): The file, for the error message.

    Returns:
        dict[str, Tensor]: The state dict.

    Raises:
        ValueError: If there is no non-empty state dict of tensors.
    """
    state = checkpoint
    for wrapper in wrappers:
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
            break
    if not isinstance(state, dict) or not state or \
            not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f'{path} does not hold a state dict of tensors (looked at the top '
                         f'level and under {list(wrappers)})')
    return state


def strip_key_prefixes(state: Mapping[str, Tensor], prefixes: Iterable[str]) -> Dict[str, Tensor]:
    """Remove any run of ``prefixes`` (e.g. ``module.`` of DDP) from the start of every key.

    Args:
        state (Mapping[str, Tensor]): A state dict.
        prefixes (Iterable[str]): Prefixes, each ending with a dot.

    Returns:
        dict[str, Tensor]: The renamed state dict, in the same order.
    """
    pattern = re.compile('^(?:' + '|'.join(re.escape(p) for p in prefixes) + ')+')
    return {pattern.sub('', key): value for key, value in state.items()}


def count_blocks(state: Mapping[str, Tensor]) -> int:
    """The number of transformer blocks of a released state dict: 1 + the largest ``i`` of
    its ``blocks.{i}.*`` keys.

    Args:
        state (Mapping[str, Tensor]): The state dict.

    Returns:
        int: The block count.

    Raises:
        ValueError: If no key starts with ``blocks.{i}.``.
    """
    return 1 + max(int(m.group(1)) for m in (re.match(r'blocks\.(\d+)\.', k) for k in state) if m)


def check_key_layout(state: Mapping[str, Tensor], reference: Mapping[str, Tensor],
                     what: str) -> None:
    """Compare a state dict with the one of the model it must load into.

    Args:
        state (Mapping[str, Tensor]): The converted state dict.
        reference (Mapping[str, Tensor]): The target model's state dict (shapes only are
            read, so a model on the meta device will do).
        what (str): Names the layout in the error (``'the VECA layout (arch ...)'``).

    Raises:
        ValueError: Listing the missing, unexpected and mis-shaped keys.
    """
    missing = sorted(set(reference) - set(state))
    unexpected = sorted(set(state) - set(reference))
    mismatched = sorted(f'{k}: {tuple(state[k].shape)} vs {tuple(reference[k].shape)}'
                        for k in set(reference) & set(state)
                        if state[k].shape != reference[k].shape)
    if missing or unexpected or mismatched:
        raise ValueError(f'the source keys do not match {what}:\n'
                         f'  missing keys: {missing}\n  unexpected keys: {unexpected}\n'
                         f'  shape mismatches: {mismatched}')
