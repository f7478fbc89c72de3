"""The model zoo (``mmlinear/.mim/model-index.yml`` and the papers' metafiles) loads with
modelindex, names configs that build, and is what the real ``mim`` CLI finds and trains."""
import contextlib
import os
import os.path as osp
import subprocess
import sys
from typing import Dict, Iterator

import modelindex
import pytest
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope
from torch import nn

import mmlinear  # noqa: F401  (registers the mmlinear:: config scope)
from mmlinear.version import __version__

MIM_ROOT = osp.join(REPO_ROOT, 'mmlinear', '.mim')
INDEX = modelindex.load(osp.join(MIM_ROOT, 'model-index.yml'))
MODELS_BY_NAME = {model.name: model for model in INDEX.models}
PAPERS = {'InfViT', 'WeightFormer', 'VECA'}
MIM = osp.join(osp.dirname(sys.executable), 'mim')
DEMO_CONFIG = 'infvit-demo-linear_shapes-cls.py'


def test_model_index_is_valid_and_lists_the_three_papers():
    # modelindex's own check: required fields, and README paths that exist.
    assert INDEX.check(silent=True) == []
    assert {collection.name for collection in INDEX.collections} == PAPERS
    for collection in INDEX.collections:
        assert collection.paper['URL'].startswith('https://arxiv.org/abs/')
        assert collection.paper['Title']
    assert len(MODELS_BY_NAME) == len(INDEX.models), 'model names must be unique'
    for model in INDEX.models:
        assert model.in_collection in PAPERS, model.name
        assert osp.splitext(osp.basename(model.config))[0] == model.name


def test_every_paper_has_reported_results_marked_as_the_papers():
    with_results = {paper: 0 for paper in PAPERS}
    for model in INDEX.models:
        metadata = model.metadata.data
        if not model.results:
            assert 'Results Reported By' not in metadata, model.name
            continue
        with_results[model.in_collection] += 1
        assert metadata['Results Reported By'].startswith('the paper'), model.name
        for result in model.results:
            assert result.task and result.dataset, model.name
            assert result.metrics and all(
                isinstance(value, float) for value in result.metrics.values()), model.name
    assert all(with_results.values()), with_results


def test_weights_are_official_releases_with_a_converter():
    for model in INDEX.models:
        converter = model.data.get('Converter')
        if model.weights is not None:
            assert model.in_collection in ('WeightFormer', 'VECA'), model.name
            assert converter, f'{model.name}: released weights need the converter command'
        if converter:
            script = converter.split()[1]
            assert script.startswith('tools/model_converters/'), model.name
            assert osp.isfile(osp.join(MIM_ROOT, script)), script
    assert not any(m.weights for m in INDEX.models if m.in_collection == 'InfViT')


@contextlib.contextmanager
def parameters_on_meta() -> Iterator[None]:
    """Give every parameter registered inside the block a meta tensor (its shape, no memory).

    Builds the real modules without allocating or initialising 300M-parameter weights; the
    other tensors the constructors compute (drop-path rates, buffers) stay on the CPU, which
    building under ``torch.device('meta')`` would break.
    """
    register_parameter = nn.Module.register_parameter

    def register_on_meta(module: nn.Module, name: str, param) -> None:
        if param is not None:
            param = nn.Parameter(param.to('meta'), requires_grad=param.requires_grad)
        register_parameter(module, name, param)

    nn.Module.register_parameter = register_on_meta
    try:
        yield
    finally:
        nn.Module.register_parameter = register_parameter


@pytest.mark.parametrize('name', sorted(MODELS_BY_NAME))
def test_config_exists_and_builds_with_the_listed_parameters(name):
    model_info = MODELS_BY_NAME[name]
    path = osp.join(MIM_ROOT, model_info.config)
    assert osp.isfile(path), path
    cfg = Config.fromfile(path)
    # The DINOv3 weights (the distillation's teacher, the probe's backbone) are a separate
    # download (configs/veca/README.md).
    for part in ('teacher', 'backbone'):
        if part in cfg.model:
            cfg.model[part].pop('checkpoint_path', None)
    init_default_scope(cfg.default_scope)
    with parameters_on_meta():
        model = MODELS.build(cfg.model)
    backbone = model.student if 'teacher' in cfg.model else model.backbone
    # A paper's baseline (DeiT beside WeightFormer) names its backbone class.
    expected = model_info.metadata.data.get('Backbone', model_info.in_collection)
    assert type(backbone).__name__ == expected
    assert all(p.device == torch.device('meta') for p in backbone.parameters())
    # The metafile's count is the backbone's, from tools/analysis_tools/get_flops.py.
    assert sum(p.numel() for p in backbone.parameters()) == model_info.metadata.parameters
    assert isinstance(model_info.metadata.flops, int) and model_info.metadata.flops > 0


@pytest.fixture(scope='module')
def installed_checkout(tmp_path_factory) -> Dict[str, str]:
    """The environment in which mim sees this checkout as the installed mmlinear.

    mim finds a package at ``pkg_resources.get_distribution(name).location``; for an editable
    install that is site-packages, which holds no mmlinear folder. A path entry with a
    distribution record and a link to this checkout's package stands in for a real install,
    so the mim runs below read this checkout's ``.mim``.
    """
    site = tmp_path_factory.mktemp('site')
    record = site / f'mmlinear-{__version__}.dist-info'
    record.mkdir()
    (record /
     'METADATA').write_text(f'Metadata-Version: 2.1\nName: mmlinear\nVersion: {__version__}\n')
    (record / 'top_level.txt').write_text('mmlinear\n')
    (site / 'mmlinear').symlink_to(osp.join(REPO_ROOT, 'mmlinear'), target_is_directory=True)
    paths = [str(site)] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


def run_mim(args, env: Dict[str, str], cwd: str) -> str:
    """Run the mim CLI; return its output, failing the test with it on a non-zero exit."""
    done = subprocess.run([MIM] + args, env=env, cwd=cwd, capture_output=True, text=True)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def test_mim_search_finds_every_model(installed_checkout, tmp_path):
    output = run_mim(['search', 'mmlinear'], installed_checkout, str(tmp_path))
    found = {
        line.split(':', 1)[1].strip()
        for line in output.splitlines() if line.startswith('config id:')
    }
    assert found == set(MODELS_BY_NAME)
    output = run_mim(['search', 'mmlinear', '--model', 'weightformer', '--field', 'weight'],
                     installed_checkout, str(tmp_path))
    assert output.count('https://huggingface.co/RuizeHe/weightformer-') == 3


@pytest.mark.slow
def test_mim_train_then_test_a_demo_config(installed_checkout, tiny_data, tmp_path):
    # Given by file name only, from outside the checkout: mim finds it under .mim/configs.
    data_root = osp.join(tiny_data, 'cls')
    loaders = ('train_dataloader', 'val_dataloader', 'test_dataloader')
    options = [f'{loader}.dataset.data_root={data_root}' for loader in loaders]
    options += [f'{loader}.num_workers=0' for loader in loaders]
    options += [f'{loader}.persistent_workers=False' for loader in loaders]
    options += ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']
    work_dir = str(tmp_path / 'work_dir')
    output = run_mim(['train', 'mmlinear', DEMO_CONFIG, '--work-dir', work_dir, '--cfg-options'] +
                     options, installed_checkout, str(tmp_path))
    assert osp.join('.mim', 'tools', 'train.py') in output
    assert 'Training finished successfully' in output
    checkpoint = osp.join(work_dir, 'epoch_1.pth')
    assert osp.isfile(checkpoint)
    output = run_mim([
        'test', 'mmlinear', DEMO_CONFIG, '--checkpoint', checkpoint, '--work-dir', work_dir,
        '--cfg-options'
    ] + options, installed_checkout, str(tmp_path))
    assert 'accuracy/top1' in output and 'Testing finished successfully' in output
