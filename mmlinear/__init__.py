"""mmlinear: linear-complexity vision backbones for the OpenMMLab toolboxes.

Importing the package is light (mmengine only, no mmdet/mmseg/mmpretrain) and applies two
process-wide compatibility shims: mmengine checkpoints load under torch's weights-only
unpickler, and ``mmlinear::`` config inheritance works.
"""
from .utils import register_config_scope, register_safe_checkpoint_globals
from .version import __version__

register_safe_checkpoint_globals()
register_config_scope()

__all__ = ['__version__']
