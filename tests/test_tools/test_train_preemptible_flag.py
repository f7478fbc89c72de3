"""tools/train.py --preemptible: adds the PreemptionHook as default_hooks.preemption, keeps a
config's options for it, and a config's ``preemption=None`` switches it off without the flag."""
import importlib.util
import os.path as osp

import pytest
from conftest import REPO_ROOT
from mmengine.config import Config


@pytest.fixture(scope='module')
def set_preemption():
    spec = importlib.util.spec_from_file_location('train_tool',
                                                  osp.join(REPO_ROOT, 'tools', 'train.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.set_preemption


@pytest.mark.parametrize('hooks, preemptible, expected', [
    (dict(), True, dict(type='mmlinear.PreemptionHook')),
    (dict(preemption=dict(exit_code=3)), True, dict(type='mmlinear.PreemptionHook', exit_code=3)),
    (dict(preemption=None), True, dict(type='mmlinear.PreemptionHook')),
    (dict(preemption=dict(type='mmlinear.PreemptionHook')), False,
     dict(type='mmlinear.PreemptionHook')),
    (dict(preemption=None), False, None),
    (dict(), False, None),
])
def test_the_flag_and_the_config_entry(set_preemption, hooks, preemptible, expected):
    cfg = Config(dict(default_hooks=dict(logger=dict(type='LoggerHook'), **hooks)))
    set_preemption(cfg, preemptible)
    assert cfg.default_hooks.get('preemption') == expected
    # Dropped, not left as None (which mmengine refuses for a hook it does not know).
    assert ('preemption' in cfg.default_hooks) == (expected is not None)
    assert cfg.default_hooks.logger == dict(type='LoggerHook')
