"""tools/deployment/pytorch2onnx.py: a checkpoint in, a checked ONNX file out, clear exits."""
import os.path as osp

import onnxruntime
import pytest
import torch
from analysis_tools_loader import load_tool
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.runner import save_checkpoint

from mmlinear.apis.onnx_export import build_export_model

pytorch2onnx = load_tool('pytorch2onnx', osp.join(REPO_ROOT, 'tools', 'deployment'))
VECA_CLS = osp.join(REPO_ROOT, 'configs', 'demo', 'veca-demo_shapes-cls.py')
# Two blocks of the demo VECA.
SHALLOW = ['model.backbone.arch.num_layers=2']


def test_exports_a_checkpoint_at_a_core_budget_and_checks_it(tmp_path, capsys):
    cfg = Config.fromfile(VECA_CLS)
    cfg.merge_from_dict({'model.backbone.arch.num_layers': 2})
    torch.manual_seed(1)
    trained = build_export_model(cfg).model
    checkpoint = str(tmp_path / 'veca.pth')
    save_checkpoint({'state_dict': trained.state_dict()}, checkpoint)
    out = str(tmp_path / 'exports' / 'veca8.onnx')  # a folder that does not exist yet
    pytorch2onnx.main([
        VECA_CLS, checkpoint, '--out', out, '--shape', '48', '40', '--active-cores', '8',
        '--cfg-options', *SHALLOW
    ])
    printed = capsys.readouterr().out
    assert f'wrote {out}: outputs cls_score' in printed
    assert 'ONNX Runtime vs PyTorch at (1, 3, 48, 40)' in printed
    # The graph holds the checkpoint's weights at 8 cores, not the config's 64.
    inputs = torch.randn(1, 3, 48, 40)
    trained.backbone.active_cores = 8
    with torch.no_grad():
        expected = trained(inputs, mode='tensor')
    session = onnxruntime.InferenceSession(out, providers=['CPUExecutionProvider'])
    (actual, ) = session.run(None, {'input': inputs.numpy()})
    torch.testing.assert_close(torch.from_numpy(actual), expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('args, message', [
    (['--shape', '100', '128'], 'not a multiple of 32'),
    (['--opset', '11'], r'opset must be an integer in \[18'),
    (['--active-cores', '16'], 'active_cores applies to VECA backbones only'),
])
def test_bad_requests_exit_with_the_reason(tmp_path, args, message):
    config = osp.join(REPO_ROOT, 'configs', 'demo',
                      'mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py')
    with pytest.raises(SystemExit, match=message):
        pytorch2onnx.main([
            config, 'none', '--out',
            str(tmp_path / 'x.onnx'), *args, '--cfg-options', 'model.backbone.init_cfg=None'
        ])
    assert not (tmp_path / 'x.onnx').exists()


def test_a_missing_checkpoint_exits_with_its_path_and_the_alternative(tmp_path):
    missing = str(tmp_path / 'iter_600.pth')
    with pytest.raises(SystemExit, match=f"checkpoint not found: {missing} .*'none'"):
        pytorch2onnx.main(
            [VECA_CLS, missing, '--out',
             str(tmp_path / 'x.onnx'), '--cfg-options', *SHALLOW])
    assert not (tmp_path / 'x.onnx').exists()
