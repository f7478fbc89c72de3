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
from mmlinear.models.decode_heads import ContextWindowUPerHead
from mmlinear.models.utils.windowed_pyramid_pooling import windowed_pyramid_pooling

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
    # The demo UperNets with mmseg's pooling of the whole map; their own, over windows:
    # test_dynamic_graph_of_a_windowed_head_holds_within_and_beyond_the_window.
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
#: cases, the head's by the windowed head on the image (windowed_head; the demo UperNet with
#: its window, windowed_upernet, is slow too), which differs in the pyramid pooling only (the
#: whole map's adaptive pooling: WeightFormer's classifier).
SLOW_CASES = ('infvit-upernet', 'veca-upernet', 'weightformer-upernet')


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


#: Both windowed models below pool windows of 128 x 128 px (the demo UperNet: 8 x 8 cells of
#: its stride-16 top level; the head on the image: 4 x 4 cells at stride 32). Each graph is
#: traced where the window holds the map (96 x 80 px) and checked where it holds the map,
#: equals it, exceeds it on both sides and on one side only.
WINDOWED_SIZES = [(1, 64, 96), (1, 128, 128), (2, 224, 160), (1, 96, 208)]


class WindowedHeadOnImage(nn.Module):
    """``ContextWindowUPerHead`` (a window of 4 x 4 cells, the four pooling scales of the
    configs) over a pyramid of strides 4 to 32 average-pooled from the image itself: the
    head's graph without a backbone's, which the classifier cases check."""

    def __init__(self) -> None:
        super().__init__()
        self.head = ContextWindowUPerHead(
            context_window=4,
            in_channels=[3, 3, 3, 3],
            in_index=[0, 1, 2, 3],
            channels=8,
            pool_scales=(1, 2, 3, 6),
            num_classes=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head([F.avg_pool2d(x, stride) for stride in (4, 8, 16, 32)])


@pytest.fixture(scope='module')
def windowed_head(tmp_path_factory):
    """The windowed head on the image, its window in cells, and its dynamic ONNX file."""
    torch.manual_seed(0)
    model = WindowedHeadOnImage().eval()
    onnx_file = str(tmp_path_factory.mktemp('onnx') / 'head-windowed.onnx')
    export_onnx(model, onnx_file, (96, 80), ['seg_logits'], dynamic=True)
    return model, model.head, 4, onnx_file


@pytest.fixture(scope='module')
def windowed_upernet(tmp_path_factory):
    """The demo UperNet as shipped, with its head's window in cells, and its dynamic ONNX
    file."""
    torch.manual_seed(0)
    model = build_export_model(demo_config('upernet_infvit-demo-linear_shapes-ade.py', 'infvit'))
    assert model.model.decode_head.context_window == (8, 8)
    onnx_file = str(tmp_path_factory.mktemp('onnx') / 'upernet-windowed.onnx')
    export_onnx(model, onnx_file, (96, 80), ['seg_logits'], dynamic=True)
    return model, model.model.decode_head, 8, onnx_file


def assert_windowed_graph_holds(windowed, batch, height, width):
    """ONNX Runtime gives PyTorch's logits at this size: the whole map's pooling where the
    window holds the map, the windows' where it does not (which differ from the whole map's
    there, so the graph is not the whole map's pooling at every size)."""
    model, head, window, onnx_file = windowed
    inputs = torch.randn(batch, 3, height, width)
    assert compare_with_onnxruntime(model, onnx_file, inputs) < 1e-4
    if max(height, width) > 128:
        with torch.no_grad():
            windowed_logits = model(inputs)
            head.context_window = 'whole'
            try:
                whole_map = model(inputs)
            finally:
                head.context_window = window
        assert (windowed_logits - whole_map).abs().max() > 1e-3


@pytest.mark.parametrize('batch, height, width', WINDOWED_SIZES)
def test_dynamic_graph_of_a_windowed_head_holds_within_and_beyond_the_window(
        windowed_head, batch, height, width):
    assert_windowed_graph_holds(windowed_head, batch, height, width)


@pytest.mark.slow
@pytest.mark.parametrize('batch, height, width', WINDOWED_SIZES)
def test_dynamic_graph_of_the_windowed_demo_upernet_holds_within_and_beyond_the_window(
        windowed_upernet, batch, height, width):
    """The same with the demo UperNet as shipped (its export takes about 100 s on a CPU)."""
    assert_windowed_graph_holds(windowed_upernet, batch, height, width)


class WindowedPooling(nn.Module):
    """Pyramid pooling of 3 x 3 bins on the image itself over windows of 4 x 3 pixels,
    resized as with and without ``align_corners`` (the windowed head above has the configs'
    four scales)."""

    def __init__(self) -> None:
        super().__init__()
        self.branches = nn.ModuleList([nn.Sequential(nn.AdaptiveAvgPool2d(3), nn.Conv2d(3, 2, 1))])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        H, W = x.shape[2:]
        pooled = []
        for align_corners in (False, True):
            pooled += windowed_pyramid_pooling(self.branches, x, 0, (0, H), (H, W), (4, 3),
                                               align_corners)
        return torch.cat(pooled, 1)


def test_windowed_pooling_graph_holds_down_to_one_pixel(tmp_path):
    """Traced with the window inside the map, the graph holds where the map is smaller than
    the window on either side, down to one pixel (a one-cell resize with ``align_corners``),
    and where it is larger."""
    torch.manual_seed(0)
    model = WindowedPooling().eval()
    onnx_file = str(tmp_path / 'pooling.onnx')
    export_onnx(model, onnx_file, (6, 5), ['pooled'], dynamic=True)
    for batch, height, width in [(2, 6, 5), (1, 1, 1), (1, 2, 7), (1, 4, 3), (3, 11, 9)]:
        inputs = torch.randn(batch, 3, height, width)
        assert compare_with_onnxruntime(model, onnx_file, inputs) < 1e-5, (height, width)


def test_dynamic_graph_of_a_windowed_backbone_holds_within_and_beyond_the_window(tmp_path):
    """InfViT with Linear-InfSA's context window of 2 x 3 tokens, traced on a 5 x 7 grid: ONNX
    Runtime gives PyTorch's scores where the grid is smaller than the window (the whole
    summary there, down to one token), as large, and larger (windows there: other scores than
    the whole summary's). One block: the graph repeats the offset's operators per block."""
    cfg = demo_config('infvit-demo-linear_shapes-cls.py', 'infvit',
                      {'model.backbone.context_window': (2, 3)})
    cfg.model.backbone.arch = dict(SHALLOW_ARCH['infvit'], num_layers=1)
    torch.manual_seed(0)
    model = build_export_model(cfg)
    backbone = model.model.backbone
    onnx_file = str(tmp_path / 'infvit-windowed.onnx')
    export_onnx(model, onnx_file, (40, 56), ['cls_score'], dynamic=True)
    for batch, height, width in [(2, 40, 56), (1, 8, 8), (1, 8, 24), (1, 16, 24), (3, 72, 48)]:
        inputs = torch.randn(batch, 3, height, width)
        assert compare_with_onnxruntime(model, onnx_file, inputs) < 1e-4, (height, width)
    with torch.no_grad():
        windowed = model(inputs)
        backbone.context_window = None
        whole = model(inputs)
    assert (windowed - whole).abs().max() > 1e-4


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
