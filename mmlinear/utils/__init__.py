from .config_scope import register_config_scope
from .safe_checkpoint import (checkpoint_getattr,
                              register_safe_checkpoint_globals)

__all__ = [
    'register_config_scope', 'register_safe_checkpoint_globals', 'checkpoint_getattr'
]
