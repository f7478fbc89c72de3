from .config_scope import register_config_scope
from .safe_checkpoint import (checkpoint_getattr, load_checkpoint_file,
                              register_safe_checkpoint_globals)

__all__ = [
    'checkpoint_getattr', 'load_checkpoint_file', 'register_config_scope',
    'register_safe_checkpoint_globals'
]
