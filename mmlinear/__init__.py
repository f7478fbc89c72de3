"""mmlinear: linear-complexity vision backbones for the OpenMMLab toolboxes.

Importing the package is light. Where mmengine is installed it applies process-wide shims:
mmengine checkpoints load under torch's weights-only unpickler, ``mmlinear::`` config
inheritance works, checkpoints are written atomically and auto-resume takes the newest
readable one, and a resumed run continues exactly where its checkpoint was written (random
states, position inside an epoch). Without mmengine (a machine with torch alone, such
as a bare GPU image) ``mmlinear.ops`` and ``mmlinear._ext`` still import and run.
"""
import importlib.util

# Before anything else: the compiled ``mmlinear._ext`` links against torch's libraries
# (libc10, ...), which only an imported torch makes loadable, so `import mmlinear._ext` works
# on its own, with or without mmengine.
import torch  # noqa: F401

from .version import __version__

if importlib.util.find_spec('mmengine') is not None:
    from .engine.exact_resume import register_exact_resume
    from .utils.atomic_checkpoint import register_atomic_checkpoints
    from .utils.config_scope import register_config_scope
    from .utils.latest_checkpoint import register_latest_valid_checkpoint
    from .utils.safe_checkpoint import register_safe_checkpoint_globals
    register_safe_checkpoint_globals()
    register_config_scope()
    register_atomic_checkpoints()
    register_latest_valid_checkpoint()
    register_exact_resume()

__all__ = ['__version__']
