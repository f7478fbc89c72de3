from .config_scope import register_config_scope
from .safe_checkpoint import (history_buffer_getattr,
                              register_safe_checkpoint_globals)

__all__ = [
    'register_config_scope', 'register_safe_checkpoint_globals', 'history_buffer_getattr'
]
