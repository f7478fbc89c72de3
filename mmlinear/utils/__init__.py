"""The ground floor: extension loading, safe checkpoint loading and writing, output files
written whole or not at all, config scope, progress.

The names are resolved on first use, so that importing ``mmlinear.utils`` (as
``mmlinear.ops`` does) needs torch only; the checkpoint and config helpers import mmengine
when they are used.
"""
import importlib
from typing import Any

# Public name -> the submodule that defines it.
_EXPORTS = {
    'atomic_output': 'atomic_write',
    'checkpoint_getattr': 'safe_checkpoint',
    'checkpoint_problem': 'latest_checkpoint',
    'find_latest_valid_checkpoint': 'latest_checkpoint',
    'write_file_atomic': 'atomic_checkpoint',
    'write_last_checkpoint': 'atomic_checkpoint',
    'load_checkpoint_file': 'safe_checkpoint',
    'safe_checkpoint_globals': 'safe_checkpoint',
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    return getattr(importlib.import_module(f'.{_EXPORTS[name]}', __name__), name)
