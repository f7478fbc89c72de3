"""mmlinear.apis.config_loading: a config loaded with its overrides, the toolbox it belongs to,
and the refusals naming what is wrong."""
import os.path as osp

import pytest
from conftest import REPO_ROOT
from mmengine.config import Config

from mmlinear.apis import SCOPES, load_config, toolbox_scope

DEMO = osp.join(REPO_ROOT, 'configs', 'demo')


@pytest.mark.parametrize('name, scope', [
    ('infvit-demo-linear_shapes-cls.py', 'mmpretrain'),
    ('upernet_infvit-demo-linear_shapes-ade.py', 'mmseg'),
    ('mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py', 'mmdet'),
])
def test_demo_configs_load_with_their_toolbox(name, scope):
    cfg = load_config(osp.join(DEMO, name), {'work_dir': 'work_dirs/elsewhere'})
    assert cfg.work_dir == 'work_dirs/elsewhere'
    assert toolbox_scope(cfg) == scope


def test_a_missing_file_is_named():
    with pytest.raises(FileNotFoundError, match='config file not found: .*nothing.py'):
        load_config(osp.join(DEMO, 'nothing.py'))


def test_another_scope_is_refused_with_the_allowed_ones():
    assert SCOPES == ('mmpretrain', 'mmdet', 'mmseg')
    with pytest.raises(ValueError, match="'mmocr' .* allowed: mmpretrain, mmdet, mmseg"):
        toolbox_scope(Config(dict(default_scope='mmocr')))
    with pytest.raises(ValueError, match="'mmengine'"):
        toolbox_scope(Config(dict()))
