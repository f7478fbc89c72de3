"""mmlinear: linear-complexity vision backbones for the OpenMMLab toolboxes.

Importing the package is light. Where mmengine is installed it applies two process-wide
compatibility shims: mmengine checkpoints load under torch's weights-only unpickler, and
``mmlinear::`` config inheritance works. Without mmengine (a machine with torch alone, such
as a bare GPU image) ``mmlinear.ops`` and ``mmlinear._ext`` still import and run.
"""
import importlib.util

# Before anything else: the compiled ``mmlinear._ext`` links against torch's libraries
# (libc10, ...), which only an imported torch makes loadable, so `import mmlinear._ext` works
# on its own, with or without mmengine.
import torch  # noqa: F401

from .version import __version__

if importlib.util.find_spec('mmengine') is not None:
    from .utils.config_scope import register_config_scope
    from .utils.safe_checkpoint import register_safe_checkpoint_globals
    register_safe_checkpoint_globals()
    register_config_scope()

__all__ = ['__version__']
