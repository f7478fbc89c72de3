"""ONNX export (mmlinear.apis.onnx_export): dynamic graphs of the three backbones in
classification, segmentation and detection reproduce PyTorch in ONNX Runtime at the traced
size and at sizes the tracer never saw, with standard ONNX operators only."""
import os.path as osp

import onnx
import pytest
import torch
import torch.nn.functional as F
from conftest import REPO_ROOT
from mmengine.config import Config
from torch import nn

import mmlinear  # noqa: F401  (the mmlinear:: config scope)
from mmlinear.apis.onnx_export import (ExportError, adaptive_avg_pool2d_any_size,
                                       build_export_model, check_export_shape, check_onnx_graph,
                                       check_opset, compare_with_onnxruntime, export_onnx,
                                       output_names, required_divisor)

# The demo widths with two blocks (WeightFormer's second block is its dynamic one): the graph
# has every layer type and traces in seconds.
SHALLOW_ARCH = {
    'infvit': dict(embed_dims=96, num_layers=2, num_heads=4, feedforward_channels=384),
    'weightformer': dict(embed_dims=96, num_layers=2, feedforward_channels=384),
    'veca': dict(embed_dims=96, num_layers=2, num_heads=2, feedforward_channels=256),
}
WHOLE_MAP_POOLING = {'model.decode_head.context_window': 'whole'}
# (config, backbone, overrides, traced (H, W), unseen (B, H, W) sizes). The unseen sizes
# include the position table's own grid (InfViT), other aspect ratios and, for the pooling
# bins of WeightFormer and UperNet, other residues of the token grid. One InfViT graph is
# traced at its training size, the position table's own grid.
CASES = {
    'infvit-linear-cls':
    ('infvit-demo-linear_shapes-cls.py', 'infvit', {}, (40, 56), [(1, 64, 64), (3, 72, 36)]),
    'infvit-linear-cls-training-size':
    ('infvit-demo-linear_shapes-cls.py', 'infvit', {}, (64, 64), [(1, 64, 96), (3, 40, 56)]),
    'infvit-pure-cls': ('infvit-demo-linear_shapes-cls.py', 'infvit', {
        'model.backbone.attn_type': 'pure'
    }, (40, 56), [(1, 64, 64), (3, 72, 36)]),
    'weightformer-cls':
    ('weightformer-demo_shapes-cls.py', 'weightformer', {}, (40, 56), [(1, 64, 64), (3, 72, 36)]),
    'veca-cls': ('veca-demo_shapes-cls.py', 'veca', {
        'model.backbone.active_cores': 16
    }, (40, 56), [(1, 64, 64), (3, 72, 36)]),
    # The demo UperNets pool their pyramid over windows, which a dynamic graph cannot hold
    # (test_a_windowed_head_exports_at_one_size_only): these graphs pool the whole map.
    'infvit-upernet': ('upernet_infvit-demo-linear_shapes-ade.py', 'infvit', WHOLE_MAP_POOLING,
                       (96, 80), [(1, 128, 128), (2, 72, 112)]),
    'weightformer-upernet': ('upernet_weightformer-demo_shapes-ade.py', 'weightformer',
                             WHOLE_MAP_POOLING, (96, 80), [(1, 128, 128), (2, 72, 112)]),
    'veca-upernet':
    ('upernet_veca-demo_shapes-ade.py', 'veca', WHOLE_MAP_POOLING, (96, 80), [(1, 128, 128),
                                                                              (2, 72, 112)]),
    'infvit-mask-rcnn': ('mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py', 'infvit', {},
                         (96, 128), [(1, 128, 128), (2, 160, 64)]),
}


def demo_config(name: str, backbone: str = None, overrides: dict = None) -> Config:
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', 'demo', name))
    # The demo detector and segmenter start from the demo classifier's checkpoint; these
    # graphs are checked on initial weights instead.
    if 'backbone' in cfg.model:
        cfg.model.backbone.init_cfg = None
    if backbone is not None:
        cfg.model.backbone.arch = SHALLOW_ARCH[backbone]
    cfg.merge_from_dict(overrides or {})
    return cfg


#: Cases run with --run-slow only: their backbones' graphs are checked by their classifier
#: cases, and the UperNet's by InfViT's.
SLOW_CASES = ('veca-upernet', 'weightformer-upernet')


@pytest.fixture(
    scope='module',
    params=[
        pytest.param(case, marks=[pytest.mark.slow] if case in SLOW_CASES else [])
        for case in sorted(CASES)
    ])
def exported(request, tmp_path_factory):
    """One case's model, its dynamic ONNX file and the case."""
    config, backbone, overrides, shape, unseen = CASES[request.param]
    torch.manual_seed(0)
    model = build_export_model(demo_config(config, backbone, overrides))
    with torch.no_grad():
        num_outputs = len(model(torch.zeros(1, 3, *shape))) if model.task == 'mmdet' else 1
    onnx_file = str(tmp_path_factory.mktemp('onnx') / f'{request.param}.onnx')
    export_onnx(model, onnx_file, shape, output_names(model.task, num_outputs), dynamic=True)
    return model, onnx_file, shape, unseen


def test_onnx_runtime_reproduces_pytorch_at_traced_and_unseen_sizes(exported):
    model, onnx_file, shape, unseen = exported
    for batch, height, width in [(2, *shape), *unseen]:
        inputs = torch.randn(batch, 3, height, width)
        assert compare_with_onnxruntime(model, onnx_file, inputs) < 1e-4, (batch, height, width)


def test_graph_has_standard_operators_and_named_dynamic_axes(exported):
    model, onnx_file, *_ = exported
    operators = check_onnx_graph(onnx_file)
    # The patch embedding: pad to whole patches, gather them, project them.
    assert {'Pad', 'Transpose', 'MatMul'} <= set(operators)
    graph = onnx.load(onnx_file).graph
    assert [value.name for value in graph.input] == ['input']
    assert [d.dim_param or d.dim_value for d in graph.input[0].type.tensor_type.shape.dim] == \
        ['batch', 3, 'height', 'width']
    names = [value.name for value in graph.output]
    if model.task == 'mmdet':
        # The simple pyramid's five levels, stride 4 to 64.
        assert names == [f'feat{i}' for i in range(5)]
    else:
        assert names == ['cls_score' if model.task == 'mmpretrain' else 'seg_logits']


class SkipsResizeAtItsGrid(nn.Module):
    """Pools 4 x 4 patches and resizes them to a 2 x 2 grid, unless they are one already."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = F.avg_pool2d(x, 4)
        if tuple(pooled.shape[-2:]) == (2, 2):
            return pooled.flatten(1)
        return F.interpolate(pooled, size=(2, 2), mode='bilinear').flatten(1)


def test_a_graph_that_holds_at_one_size_only_is_refused(tmp_path):
    # Traced at 8 x 8 the graph would skip the resize at every size.
    with pytest.raises(ExportError, match=r'size-specific branch at 8 x 8.*height//4\), 2'):
        export_onnx(SkipsResizeAtItsGrid(), str(tmp_path / 'x.onnx'), (8, 8), ['out'], dynamic=True)
    assert not (tmp_path / 'x.onnx').exists()
    export_onnx(SkipsResizeAtItsGrid(), str(tmp_path / 'x.onnx'), (12, 8), ['out'], dynamic=True)
    assert (tmp_path / 'x.onnx').exists()


def test_a_windowed_head_exports_at_one_size_only(tmp_path):
    """The demo UperNet's pyramid pooling over windows of 8 cells: a dynamic graph is refused
    naming the two ways out; a static graph at 160 x 160 (a 10 x 10 top level, so windows
    smaller than the map) reproduces PyTorch's windowed logits."""
    cfg = demo_config('upernet_infvit-demo-linear_shapes-ade.py', 'infvit')
    torch.manual_seed(0)
    model = build_export_model(cfg)
    assert model.model.decode_head.context_window == (8, 8)
    onnx_file = tmp_path / 'upernet.onnx'
    with pytest.raises(
            ExportError,
            match=r'decode_head \(context_window=\(8, 8\)\).*without '
            r'--dynamic-shape.*context_window=whole'):
        export_onnx(model, str(onnx_file), (160, 160), ['seg_logits'], dynamic=True)
    assert not onnx_file.exists()
    export_onnx(model, str(onnx_file), (160, 160), ['seg_logits'])
    inputs = torch.randn(1, 3, 160, 160)
    assert compare_with_onnxruntime(model, str(onnx_file), inputs) < 1e-4
    with torch.no_grad():
        windowed = model(inputs)
        model.model.decode_head.context_window = 'whole'
        whole_map = model(inputs)
    assert (windowed - whole_map).abs().max() > 1e-3  # the graph holds the windows


def test_static_graph_takes_the_traced_size(tmp_path):
    cfg = demo_config('weightformer-demo_shapes-cls.py', 'weightformer')
    model = build_export_model(cfg)
    onnx_file = str(tmp_path / 'static.onnx')
    export_onnx(model, onnx_file, (48, 40), ['cls_score'])
    graph = onnx.load(onnx_file).graph
    assert [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim] == [1, 3, 48, 40]
    assert compare_with_onnxruntime(model, onnx_file, torch.randn(1, 3, 48, 40)) < 1e-4


@pytest.mark.parametrize('in_size', [(4, 4), (5, 7), (12, 17), (2, 9), (32, 30)])
def test_adaptive_pooling_decomposition_matches_pytorch(in_size):
    x = torch.randn(2, 3, *in_size, dtype=torch.float64)
    for out_size in [(3, 3), (6, 2), (1, 1)]:
        torch.testing.assert_close(
            adaptive_avg_pool2d_any_size(x, out_size), F.adaptive_avg_pool2d(x, out_size))


def test_bad_inputs_are_refused_with_the_allowed_values():
    with pytest.raises(ExportError, match=r'opset must be an integer in \[18, '):
        check_opset(11)
    det_cfg = demo_config('mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py')
    assert required_divisor(det_cfg) == 32
    with pytest.raises(ExportError, match=r'not a multiple of 32.*32, 64, 96'):
        check_export_shape((100, 128), required_divisor(det_cfg))
    with pytest.raises(ExportError, match='two positive integers'):
        check_export_shape((0, 64))
    assert required_divisor(demo_config('infvit-demo-linear_shapes-cls.py')) == 1
    with pytest.raises(ExportError, match=r'cannot export a VECADistiller.*ImageClassifier'):
        build_export_model(demo_config('veca-demo_distill_shapes.py'))
    with pytest.raises(ExportError, match='active_cores applies to VECA backbones only'):
        build_export_model(demo_config('infvit-demo-linear_shapes-cls.py'), active_cores=16)
    with pytest.raises(ExportError, match=r'active_cores must be one of \(8, 16, 24'):
        build_export_model(demo_config('veca-demo_shapes-cls.py'), active_cores=12)
    cfg = demo_config('infvit-demo-linear_shapes-cls.py')
    cfg.default_scope = 'mmengine'
    with pytest.raises(ExportError, match='allowed: mmpretrain, mmdet, mmseg'):
        build_export_model(cfg)
