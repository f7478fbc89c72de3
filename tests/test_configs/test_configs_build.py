"""Every config under configs/ loads and builds its model under its own default scope."""
import glob
import os.path as osp

import pytest
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope

import mmlinear  # noqa: F401
from conftest import REPO_ROOT

CONFIGS = sorted(
    p for p in glob.glob(osp.join(REPO_ROOT, 'configs', '**', '*.py'), recursive=True)
    if '_base_' not in p)


def test_configs_exist():
    names = {osp.relpath(p, osp.join(REPO_ROOT, 'configs')) for p in CONFIGS}
    for variant in ('linear', 'pure', 'softmax'):
        assert f'infvit/infvit-4l-{variant}_16xb64_in1k.py' in names
        assert f'infvit/mask-rcnn_infvit-4l-{variant}_fpn_1x_coco.py' in names
        assert f'infvit/upernet_infvit-4l-{variant}_8xb2-160k_ade20k-512x512.py' in names
    assert sum(n.startswith('demo/') for n in names) >= 3


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: osp.relpath(p, REPO_ROOT))
def test_config_builds_model(path):
    cfg = Config.fromfile(path)
    scope = cfg.default_scope
    assert scope in ('mmpretrain', 'mmdet', 'mmseg')
    init_default_scope(scope)
    model = MODELS.build(cfg.model)
    backbone = model.backbone
    assert type(backbone).__name__ == 'InfViT'
    expected = 'linear'
    for variant in ('pure', 'softmax'):
        if f'-{variant}_' in osp.basename(path):
            expected = variant
    assert backbone.attn_type == expected
