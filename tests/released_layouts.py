"""The released checkpoints' layouts (``tests/data/released_layouts/<model>.json``), fake
checkpoints built from them and the models of ours they load into.

Each JSON file lists, for one released model, every state-dict key with its shape and dtype
as the official code builds the model, says where the weights are published and in which
container (which top-level entry holds the state dict, what else the file holds), and names
the repository, commit and class the facts were read from.
"""
import json
import os.path as osp
from collections import OrderedDict
from typing import Dict

import torch
from conftest import REPO_ROOT
from mmengine.registry import MODELS, init_default_scope
from torch import nn

from mmlinear.models import VECA, WeightFormer

LAYOUT_DIR = osp.join(REPO_ROOT, 'tests', 'data', 'released_layouts')


def read_layout(name: str) -> dict:
    """The layout record ``<name>.json`` (e.g. ``'weightformer-t'``, ``'veca-small'``)."""
    with open(osp.join(LAYOUT_DIR, f'{name}.json')) as f:
        return json.load(f)


def fake_state(layout: dict, device: str = 'cpu', seed: int = 0) -> Dict[str, torch.Tensor]:
    """A state dict with the layout's keys, in order, shapes and dtypes: random values
    (scaled like trained weights) on a real device, storage-free tensors on ``'meta'``."""
    generator = torch.Generator().manual_seed(seed)
    state = OrderedDict()
    for key, shape, dtype in layout['keys']:
        dtype = getattr(torch, dtype)
        if device == 'meta':
            state[key] = torch.empty(shape, dtype=dtype, device='meta')
        else:
            state[key] = (torch.randn(shape, generator=generator) * 0.02).to(dtype)
    return state


def training_entries(container: dict) -> dict:
    """Stand-ins for the entries a released file holds besides the weights (optimizer and
    scheduler states, counters), in the types torch.save keeps for them; ``config`` is left
    to the caller."""
    optimizer = dict(
        state={0: dict(step=torch.tensor(10.), exp_avg=torch.zeros(4))},
        param_groups=[dict(lr=1e-4, params=[0])])
    entries = {}
    for key in container.get('other_top_level_keys', []):
        if key.startswith('optimizer'):
            entries[key] = optimizer
        elif 'scheduler' in key:
            entries[key] = dict(last_epoch=10, base_lrs=[1e-4])
        elif key != 'config':
            entries[key] = 0
    return entries


#: The released models and our presets of the same size.
WEIGHTFORMER_ARCHS = {'weightformer-t': 't', 'weightformer-s': 's', 'weightformer-b': 'b'}
VECA_ARCHS = {
    'veca-small': 'small',
    'veca-splus': 'splus',
    'veca-base': 'base',
    'veca-large': 'large'
}
TEACHER_WIDTH = 768  # DINOv3 ViT-B/16: the released students project to it


def weightformer_classifier(arch: str) -> nn.Module:
    """An mmpretrain ImageClassifier with our WeightFormer preset ``arch`` and a 1000-class
    linear head, as the released classifiers are."""
    init_default_scope('mmpretrain')
    return MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(type='mmlinear.WeightFormer', arch=arch, out_type='avg_featmap'),
            neck=None,
            head=dict(
                type='LinearClsHead',
                num_classes=1000,
                in_channels=WeightFormer.arch_zoo[arch]['embed_dims'])))


def veca_holder(arch: str, out_channels) -> nn.Module:
    """A module holding our VECA as ``backbone``, as a model built from a config does."""
    holder = nn.Module()
    holder.backbone = VECA(arch=arch, out_channels=out_channels, init_cfg=None)
    return holder


def assert_loads_strictly(model: nn.Module, state: Dict[str, torch.Tensor]) -> None:
    """``state`` has exactly ``model``'s keys and shapes (meta tensors are assigned)."""
    model.load_state_dict(state, strict=True, assign=True)
