"""Every way mmlinear loads a checkpoint refuses one that would run code, and runs none of it.

The malicious file is a checkpoint whose unpickling would create a file (a stand-in for
arbitrary code); after each refusal that file must not exist.
"""
import builtins
import os.path as osp
import sys
import traceback

import pytest
import torch
from conftest import REPO_ROOT
from mmengine.runner import CheckpointLoader, load_checkpoint

import mmlinear  # noqa: F401  (registers the allowlist)
from mmlinear.models.backbones import InfViT

sys.path.insert(0, osp.join(REPO_ROOT, 'tests', 'test_tools'))
from analysis_tools_loader import load_tool, run_tool_main  # noqa: E402

DEMO_CLS = osp.join(REPO_ROOT, 'configs', 'demo', 'infvit-demo-linear_shapes-cls.py')


class CreatesFile:

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (builtins.open, (self.path, 'w'))


@pytest.fixture
def evil(tmp_path):
    """(checkpoint path, path of the file its unpickling would create)."""
    target = tmp_path / 'pwned.txt'
    path = tmp_path / 'evil.pth'
    model = InfViT(arch='infvit-test')
    torch.save(
        dict(
            state_dict={
                f'backbone.{k}': v
                for k, v in model.state_dict().items()
            },
            meta=dict(epoch=1, iter=1),
            payload=CreatesFile(str(target))), path)
    return str(path), target


def test_python_loading_paths_refuse(evil):
    path, target = evil
    model = InfViT(arch='infvit-test')
    with pytest.raises(Exception, match='Weights only load failed'):
        torch.load(path)
    assert not target.exists()
    loaders = {
        'CheckpointLoader':
        lambda: CheckpointLoader.load_checkpoint(path, map_location='cpu'),
        'load_checkpoint':
        lambda: load_checkpoint(model, path, map_location='cpu'),
        'init_cfg Pretrained':
        lambda: InfViT(
            arch='infvit-test',
            init_cfg=dict(type='Pretrained', checkpoint=path, prefix='backbone.')).init_weights(),
    }
    for name, load in loaders.items():
        with pytest.raises(
                Exception, match=f'refusing to load checkpoint {path}: it holds the '
                'global io.open'):
            load()
        assert not target.exists(), name


def tool_fails(args, target):
    """Run ``python SCRIPT ARGS`` by the script's main in this process (a process of its own
    costs seconds of imports), from the repository root with the ``LOCAL_RANK`` that
    tools/train.py and tools/test.py set restored; check that it fails and that the file was
    not created.

    Returns:
        str: What the failure prints: the converter's message, or the traceback of the error
        that stops train.py or test.py.
    """
    script, *argv = args
    tool = load_tool(
        osp.splitext(osp.basename(script))[0], osp.join(REPO_ROOT, osp.dirname(script)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv('LOCAL_RANK', '0')
        patch.chdir(REPO_ROOT)
        try:
            result = run_tool_main(tool, *argv)
        except Exception as error:  # noqa: BLE001  (as the interpreter prints it, then exits 1)
            stderr = ''.join(traceback.format_exception(type(error), error, error.__traceback__))
        else:
            assert result.returncode != 0
            stderr = result.stderr
    assert not target.exists()
    return stderr


@pytest.mark.parametrize('tool', ['test', 'resume', 'load_from', 'converter'])
def test_tools_refuse_with_a_clear_error(tool, evil, tmp_path, tiny_data):
    path, target = evil
    work_dir = str(tmp_path / 'work')
    # The tools check that the data exists before they load anything: point them at real data.
    data = [
        f'{loader}.dataset.data_root={tiny_data}/cls'
        for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader')
    ]
    args = {
        'test': ['tools/test.py', DEMO_CLS, path, '--work-dir', work_dir, '--cfg-options'] + data,
        'resume':
        ['tools/train.py', DEMO_CLS, '--work-dir', work_dir, '--resume', path, '--cfg-options'] +
        data,
        'load_from':
        ['tools/train.py', DEMO_CLS, '--work-dir', work_dir, '--cfg-options', f'load_from={path}'] +
        data,
        'converter':
        ['tools/model_converters/weightformer2mmlinear.py', path,
         str(tmp_path / 'out.pth')],
    }[tool]
    stderr = tool_fails(args, target)
    assert f'refusing to load checkpoint {path}' in stderr, stderr[-2000:]
    assert 'it holds the global io.open' in stderr  # names what it found (open is io.open)
    assert not osp.exists(tmp_path / 'out.pth')
