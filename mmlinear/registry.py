"""mmlinear's registries: children of the mmengine roots under the scope ``mmlinear``.

Configs of every toolbox reference our modules as ``type='mmlinear.X'``; mmengine then imports
``mmlinear.registry`` and, through ``locations``, the modules that register into it. Inside the
package, sub-modules are created directly in Python: an unprefixed registry build would be
redirected to the runner's default scope (mmdet, mmseg or mmpretrain), which cannot see them.
"""
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import OPTIM_WRAPPERS as MMENGINE_OPTIM_WRAPPERS
from mmengine.registry import PARAM_SCHEDULERS as MMENGINE_PARAM_SCHEDULERS
from mmengine.registry import Registry


def _child(name: str, parent: Registry, location: str) -> Registry:
    """A registry of the scope ``mmlinear`` under one of mmengine's, filled by importing
    ``location``."""
    return Registry(name, parent=parent, scope='mmlinear', locations=[location])


MODELS = _child('model', MMENGINE_MODELS, 'mmlinear.models')
DATASETS = _child('dataset', MMENGINE_DATASETS, 'mmlinear.datasets')
OPTIM_WRAPPERS = _child('optim_wrapper', MMENGINE_OPTIM_WRAPPERS, 'mmlinear.engine')
HOOKS = _child('hook', MMENGINE_HOOKS, 'mmlinear.engine.hooks')
PARAM_SCHEDULERS = _child('parameter scheduler', MMENGINE_PARAM_SCHEDULERS, 'mmlinear.engine')
