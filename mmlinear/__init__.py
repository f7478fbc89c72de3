"""mmlinear: linear-complexity vision backbones for the OpenMMLab toolboxes.

Importing the package is light. Where mmengine is installed it applies process-wide shims
(all of them in :mod:`mmlinear.engine.upstream_shims`): mmengine checkpoints load under torch's
weights-only unpickler, ``mmlinear::`` config inheritance works, checkpoints are written
atomically and auto-resume takes the newest readable one, and a resumed run continues exactly
where its checkpoint was written (random states, position inside an epoch). Without mmengine
(a machine with torch alone, such as a bare GPU image) ``mmlinear.ops`` and ``mmlinear._ext``
still import and run.
"""
import importlib.util

# Before anything else: the compiled ``mmlinear._ext`` links against torch's libraries
# (libc10, ...), which only an imported torch makes loadable, so `import mmlinear._ext` works
# on its own, with or without mmengine.
import torch  # noqa: F401

from .version import __version__

if importlib.util.find_spec('mmengine') is not None:
    from .engine.upstream_shims import install_upstream_shims
    install_upstream_shims()

__all__ = ['__version__']
