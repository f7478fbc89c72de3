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

MODELS = Registry('model', parent=MMENGINE_MODELS, scope='mmlinear', locations=['mmlinear.models'])

DATASETS = Registry(
    'dataset', parent=MMENGINE_DATASETS, scope='mmlinear', locations=['mmlinear.datasets'])

OPTIM_WRAPPERS = Registry(
    'optim_wrapper',
    parent=MMENGINE_OPTIM_WRAPPERS,
    scope='mmlinear',
    locations=['mmlinear.engine'])

HOOKS = Registry(
    'hook', parent=MMENGINE_HOOKS, scope='mmlinear', locations=['mmlinear.engine.hooks'])

PARAM_SCHEDULERS = Registry(
    'parameter scheduler',
    parent=MMENGINE_PARAM_SCHEDULERS,
    scope='mmlinear',
    locations=['mmlinear.engine'])
