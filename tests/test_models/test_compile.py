"""``torch.compile(fullgraph=True)`` of the backbones, a classifier and a segmentor: one graph
each, equal to eager (output and input gradient), with the ``torch.ops.mmlinear`` kernels
running inside it.

The graphs are captured by Dynamo and differentiated by AOTAutograd, which is where the
operators' fake impls and registered autograd act, and run with the ``aot_eager`` backend:
inductor's C++ code generation would take minutes per model on a shared CPU. Inductor itself
compiles the three ops in ``tests/test_ops/test_torch_library_ops.py`` (its generated code
calls them). Tracing a model takes tens of seconds on a shared CPU, so by default only the two
backbones with kernels run; the other backbones and the whole models are marked slow.
"""
import os.path as osp

import pytest
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.registry import init_default_scope

from mmlinear.models.backbones import VECA, InfViT, WeightFormer
from mmlinear.utils.ext_loader import KERNEL_CALLS, load_ext

BACKEND = 'aot_eager'
BACKBONES = {
    'infvit-linear': lambda: InfViT(arch='test', attn_type='linear', out_type='featmap'),
    'infvit-pure': lambda: InfViT(arch='test', attn_type='pure', out_type='featmap'),
    'weightformer': lambda: WeightFormer(arch='test', out_type='featmap'),
    'veca': lambda: VECA(arch='test', out_type='featmap'),
}
# Linear-InfSA runs factorised in plain PyTorch (docs/ops.md) and VECA has no custom op.
KERNELS = {
    'infvit-linear': set(),
    'infvit-pure': {'pure_infsa', 'pure_infsa_backward'},
    'weightformer': {'dynamic_dwconv2d', 'dynamic_dwconv2d_backward'},
    'veca': set(),
}


def build_task_model(name: str, scope: str, **backbone) -> torch.nn.Module:
    """The model of a demo config, its backbone options updated with ``backbone``."""
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', 'demo', name))
    cfg.model.backbone.update(backbone)
    init_default_scope(scope)
    registry = __import__(f'{scope}.registry', fromlist=['MODELS']).MODELS
    return registry.build(cfg.model)


TASK_MODELS = {
    # The demo classifier with Pure InfSA, so that its graph holds a kernel.
    'classifier':
    (lambda: build_task_model('infvit-demo-linear_shapes-cls.py', 'mmpretrain', attn_type='pure'),
     {'pure_infsa', 'pure_infsa_backward'}),
    'segmentor': (lambda: build_task_model('upernet_weightformer-demo_shapes-ade.py', 'mmseg'),
                  {'dynamic_dwconv2d', 'dynamic_dwconv2d_backward'}),
}


def outputs_and_input_grad(forward, x):
    outs = forward(x)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    (grad, ) = torch.autograd.grad(sum(o.square().sum() for o in outs), x)
    return outs, grad


def check_compiled_matches_eager(model: torch.nn.Module, forward, kernels: set) -> None:
    """``forward(model, x)`` compiled as one graph equals eager and runs ``kernels``."""
    torch.manual_seed(0)
    model = model.double().eval()
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64, requires_grad=True)
    expected, expected_grad = outputs_and_input_grad(lambda t: forward(model, t), x)
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: forward(model, t), fullgraph=True, backend=BACKEND)
    before = KERNEL_CALLS.copy()
    outs, grad = outputs_and_input_grad(compiled, x)
    if load_ext() is not None:
        assert set(KERNEL_CALLS - before) == kernels
    assert len(outs) == len(expected)
    for out, ref in zip(outs, expected):
        torch.testing.assert_close(out, ref, atol=1e-9, rtol=1e-7)
    torch.testing.assert_close(grad, expected_grad, atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize('name', [
    pytest.param(name, marks=[] if KERNELS[name] else [pytest.mark.slow])
    for name in sorted(BACKBONES)
])
def test_backbone_compiles_as_one_graph(name):
    check_compiled_matches_eager(BACKBONES[name](), lambda model, x: model(x), KERNELS[name])


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(TASK_MODELS))
def test_task_model_compiles_as_one_graph(name):
    build, kernels = TASK_MODELS[name]
    check_compiled_matches_eager(build(), lambda model, x: model(x, mode='tensor'), kernels)
