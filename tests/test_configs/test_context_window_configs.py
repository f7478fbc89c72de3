"""Every config whose UPerHead pools a context window gives it the size of the head's top
input level on a training crop: training sees the whole map (UPerHead exactly) and a large
image gives each position its training context."""
import glob
import os.path as osp
import re

import pytest
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from mmseg.apis import init_model

from mmlinear.models.utils.windowed_pyramid_pooling import check_context_window


def bases(path):
    """The config files ``path`` inherits from in this repository (its ``_base_`` entries
    that are relative paths, and theirs)."""
    text = open(path).read()
    found = []
    for base in re.findall(r"['\"]([^'\":]+\.py)['\"]", text.split('_base_', 1)[1]) \
            if '_base_' in text else []:
        base_path = osp.normpath(osp.join(osp.dirname(path), base))
        if osp.exists(base_path):
            found += [base_path, *bases(base_path)]
    return found


def window_configs():
    """The configs (paths relative to configs/) whose decode head has a window: those that
    name ``ContextWindowUPerHead`` or inherit from one that does, loaded and checked."""
    found = []
    for path in sorted(glob.glob(osp.join(REPO_ROOT, 'configs', '**', '*.py'), recursive=True)):
        if '_base_' in path or not any('ContextWindowUPerHead' in open(p).read()
                                       for p in [path, *bases(path)]):
            continue
        head = Config.fromfile(path).get('model', {}).get('decode_head', {})
        if head.get('type') == 'mmlinear.ContextWindowUPerHead' and check_context_window(
                head.get('context_window')) is not None:
            found.append(osp.relpath(path, osp.join(REPO_ROOT, 'configs')))
    return found


WINDOW_CONFIGS = window_configs()


def test_the_demo_infvit_upernet_is_among_them():
    assert 'demo/upernet_infvit-demo-linear_shapes-ade.py' in WINDOW_CONFIGS


@pytest.mark.parametrize('name', WINDOW_CONFIGS)
def test_window_is_the_top_level_of_a_training_crop(name):
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', name))
    crop = cfg.crop_size
    cfg.model.backbone.init_cfg = None
    model = init_model(cfg, None, device='cpu')
    with torch.no_grad():
        levels = model.extract_feat(torch.zeros(1, 3, *crop))
    head = model.decode_head
    top = head._transform_inputs(levels)[-1]
    assert head.context_window == tuple(top.shape[2:]), (
        f'{name}: context_window {head.context_window} cells, but a {crop} training crop '
        f'gives a top level of {tuple(top.shape[2:])} cells')
