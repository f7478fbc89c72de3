"""The demo configs' mmseg / mmdet models with their constructors' random weights, for the
tests that need a real model but no training, and such a model saved as a runner saves it."""
import warnings
from typing import Union

import torch
from mmengine.config import Config
from mmengine.runner import save_checkpoint
from torch import nn


def random_demo_model(config: Union[str, Config]) -> nn.Module:
    """The model of ``config`` (an mmseg segmentor or an mmdet detector), weights drawn with
    seed 0, nothing pretrained loaded, on the CPU.

    Args:
        config (str | Config): Path of the config, or the config (its backbone's
            ``init_cfg`` is cleared).

    Returns:
        nn.Module: The model built by mmseg's ``init_model`` or mmdet's ``init_detector``.
    """
    cfg = Config.fromfile(config) if isinstance(config, str) else config
    cfg.model.backbone.init_cfg = None
    torch.manual_seed(0)
    if 'decode_head' in cfg.model:
        from mmseg.apis import init_model as init
    else:
        from mmdet.apis import init_detector as init
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return init(cfg, None, device='cpu')


def save_random_checkpoint(config: str, path: str, dataset_meta: dict) -> str:
    """:func:`random_demo_model` of ``config`` saved at ``path`` with ``dataset_meta`` (its
    classes, palette) in the checkpoint's meta, as a runner saves it; returns ``path``."""
    model = random_demo_model(config)
    save_checkpoint(dict(meta=dict(dataset_meta=dataset_meta), state_dict=model.state_dict()), path)
    return path
