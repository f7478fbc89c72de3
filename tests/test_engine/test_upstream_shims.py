"""Every process-wide patch of an upstream package is installed by one module, which says for
each what it replaces, against which upstream versions, why and when it can go."""
import ast
import os.path as osp
from pathlib import Path

import mmengine.runner
import mmengine.runner.checkpoint
import mmengine.runner.runner
import pytest
from conftest import REPO_ROOT
from mmengine.config import config as config_module
from mmengine.config import utils as config_utils
from mmengine.hooks import CheckpointHook
from mmengine.runner import EpochBasedTrainLoop, Runner
from mmengine.runner.checkpoint import CheckpointLoader

import mmlinear  # noqa: F401  (installs the import-time shims)
from mmlinear.engine import CPUAmpOptimWrapper, exact_resume, upstream_shims
from mmlinear.utils import atomic_checkpoint, latest_checkpoint, safe_checkpoint
from mmlinear.utils.config_scope import get_installed_path

UPSTREAM = ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmpretrain', 'torch')
PACKAGE = Path(REPO_ROOT, 'mmlinear')


def test_every_shim_says_what_why_which_versions_and_when_it_can_go():
    assert set(upstream_shims.AT_IMPORT) < set(upstream_shims.SHIMS)
    for name, shim in upstream_shims.SHIMS.items():
        for field in ('replaces', 'upstream', 'why', 'remove_when'):
            assert getattr(shim, field).strip(), f'{name}: empty {field}'
        assert any(c.isdigit() for c in shim.upstream), f'{name}: no upstream version'


def test_importing_mmlinear_installs_the_mmengine_shims():
    for module in (mmengine.runner, mmengine.runner.checkpoint, mmengine.runner.runner):
        assert module.save_checkpoint is atomic_checkpoint.save_checkpoint
        assert module.find_latest_checkpoint is latest_checkpoint.find_latest_valid_checkpoint
    assert CheckpointHook._save_checkpoint_with_step is atomic_checkpoint.save_checkpoint_with_step
    assert Runner.save_checkpoint is exact_resume.save_checkpoint
    assert Runner.resume is exact_resume.resume
    assert Runner.build_train_loop is exact_resume.build_train_loop
    assert EpochBasedTrainLoop.run_epoch is exact_resume.run_epoch
    assert config_module.get_installed_path is get_installed_path
    assert config_utils.MODULE2PACKAGE['mmlinear'] == 'mmlinear'
    assert CheckpointLoader._schemes[''] is safe_checkpoint.load_checkpoint_file


def test_the_mmcv_shim_is_installed_once_by_the_cpu_amp_wrapper():
    import torch
    from mmcv.ops.nms import NMSop
    model = torch.nn.Linear(2, 2)
    for _ in range(2):
        CPUAmpOptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    upstream_shims.install_shim('mmcv_cpu_autocast')
    wrapped = NMSop.forward.__wrapped__  # functools.wraps of the float32 wrapper
    assert not hasattr(wrapped, '__wrapped__'), 'wrapped more than once'


def test_an_unknown_shim_is_refused_with_the_known_names():
    with pytest.raises(KeyError, match='unknown shim .*exact_resume'):
        upstream_shims.install_shim('exact-resume')


def upstream_names(tree: ast.Module) -> set:
    """The names a module binds to upstream packages or their members by importing them."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split('.')[0]
                      for a in node.names if a.name.split('.')[0] in UPSTREAM}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and \
                node.module.split('.')[0] in UPSTREAM:
            names |= {a.asname or a.name for a in node.names}
    return names


def root_name(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ''


def test_no_other_module_assigns_to_upstream_attributes():
    offenders = []
    for path in sorted(PACKAGE.rglob('*.py')):
        if path.name == 'upstream_shims.py':
            continue
        tree = ast.parse(path.read_text())
        upstream = upstream_names(tree)
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            offenders += [
                f'{osp.relpath(path, REPO_ROOT)}:{node.lineno}' for target in targets
                if isinstance(target, ast.Attribute) and root_name(target) in upstream
            ]
    assert not offenders, f'upstream attributes assigned outside upstream_shims: {offenders}'
