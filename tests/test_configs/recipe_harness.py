"""Build a config's optimizer wrapper and parameter schedulers as mmengine's runner does, and
step them through a run, for the recipe tests (test_recipes_*.py).

The steps are mmengine 0.10.7's own code, in the order ``Runner.train`` runs them:
``build_optim_wrapper`` (the config's ``paramwise_cfg``), ``Runner.scale_lr`` (the config's
``auto_scale_lr`` with the given batch size per process and number of processes), then
``Runner._build_param_scheduler`` (default ``end``, ``convert_to_iter_based`` with the given
iterations per epoch); the schedulers are then stepped by ``ParamSchedulerHook`` after every
iteration and every epoch, with an optimizer step before each scheduler step. Only the
runner itself is replaced by a stand-in holding the attributes those functions read.
"""
import copy
import importlib.util
from types import SimpleNamespace
from typing import Dict, List

from mmengine.hooks import ParamSchedulerHook
from mmengine.logging import MMLogger
from mmengine.optim import build_optim_wrapper
from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop, Runner
from torch import nn

import mmlinear.engine  # noqa: F401  (mmlinear's schedulers)

AMP_ONLY_KEYS = ('dtype', 'loss_scale', 'use_fsdp')
# Stands in for timm's DINOv3 ViT-B/16 teacher of the distillation configs when timm is
# missing: 768 wide, 16-px patches, one layer.
TINY_TEACHER = dict(
    type='mmpretrain.VisionTransformer',
    arch=dict(embed_dims=768, num_layers=1, num_heads=12, feedforward_channels=768),
    img_size=64,
    patch_size=16,
    out_type='raw')


def use_buildable_teacher(cfg) -> None:
    """Make a distillation config's teacher buildable here, in place: timm's DINOv3 itself
    with random weights (the released weights are not here), or, without timm, the tiny
    768-wide ViT ``TINY_TEACHER``."""
    if importlib.util.find_spec('timm') is None:
        cfg.model.teacher = TINY_TEACHER
        cfg.model.teacher_num_register_tokens = 0
    else:
        cfg.model.teacher.checkpoint_path = ''


def plain_wrapper_cfg(cfg) -> dict:
    """The config's optimizer wrapper as a plain ``OptimWrapper`` (the AMP wrappers need a
    GPU; the parameter groups and learning rates do not depend on the wrapper type)."""
    wrapper = copy.deepcopy(cfg.optim_wrapper.to_dict())
    wrapper['type'] = 'OptimWrapper'
    for key in AMP_ONLY_KEYS:
        wrapper.pop(key, None)
    return wrapper


def build_wrapper(cfg, model: nn.Module):
    """The optimizer wrapper of ``cfg`` for ``model`` (its paramwise groups)."""
    return build_optim_wrapper(model, plain_wrapper_cfg(cfg))


def weight_decay_of(cfg, model: nn.Module) -> Dict[str, float]:
    """The weight decay each named parameter of ``model`` gets from the config."""
    wrapper = build_wrapper(cfg, model)
    decay = {}
    for group in wrapper.optimizer.param_groups:
        for param in group['params']:
            decay[id(param)] = group['weight_decay']
    return {name: decay[id(param)] for name, param in model.named_parameters()}


class StandIn(nn.Module):
    """The smallest model with a decayed weight and a bias (one parameter group each)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)


def lr_curve(cfg, batch_size: int, world_size: int, epoch_length: int) -> List[float]:
    """The learning rate of every training iteration of ``cfg`` (the group of ``fc.weight``
    of a stand-in model), with ``batch_size`` images per process on ``world_size`` processes
    and ``epoch_length`` iterations per epoch.

    The train loop's length is the config's (``max_epochs`` x ``epoch_length`` or
    ``max_iters``).
    """
    model = StandIn()
    wrapper = build_wrapper(cfg, model)
    by_epoch = cfg.train_cfg.get('by_epoch', cfg.train_cfg.get('type') != 'IterBasedTrainLoop')
    loop_type = EpochBasedTrainLoop if by_epoch else IterBasedTrainLoop
    if by_epoch:
        max_epochs = cfg.train_cfg.max_epochs
        max_iters = max_epochs * epoch_length
    else:
        max_iters = cfg.train_cfg.max_iters
        max_epochs = None
    runner = SimpleNamespace(
        _train_dataloader=dict(batch_size=batch_size),
        world_size=world_size,
        logger=MMLogger.get_current_instance(),
        param_schedulers=copy.deepcopy(cfg.param_scheduler),
        _train_loop=object.__new__(loop_type),
        max_epochs=max_epochs,
        max_iters=max_iters,
        train_dataloader=range(epoch_length))
    Runner.scale_lr(runner, wrapper, cfg.get('auto_scale_lr'))
    runner.param_schedulers = Runner._build_param_scheduler(runner, runner.param_schedulers,
                                                            wrapper)
    hook = ParamSchedulerHook()
    group = next(g for g in wrapper.optimizer.param_groups if g['params'][0] is model.fc.weight)
    lrs = []
    for it in range(max_iters):
        lrs.append(group['lr'])
        wrapper.step()
        hook.after_train_iter(runner, batch_idx=it % epoch_length)
        if by_epoch and (it + 1) % epoch_length == 0:
            hook.after_train_epoch(runner)
    return lrs


def with_auto_scale_lr(cfg, enable: bool):
    """A copy of ``cfg`` with ``auto_scale_lr.enable`` set (as ``--auto-scale-lr`` does)."""
    cfg = copy.deepcopy(cfg)
    cfg.auto_scale_lr.enable = enable
    return cfg
