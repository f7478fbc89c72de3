"""The backbones' CPU inference on every backend of mmlinear.ops.linear: oneDNN's fused
epilogues (WeightFormer's GELU, VECA's SwiGLU gate, the bias) compute what the PyTorch
reference does, in float32 and under bfloat16 autocast, whole and streamed."""
import pytest
import torch

from mmlinear.models import VECA, WeightFormer
from mmlinear.ops import BACKEND_VARIABLE, cpu_choices, forget_choices
from mmlinear.ops.cpu_dispatch import onednn_available

pytestmark = pytest.mark.skipif(not onednn_available(), reason='no oneDNN in this PyTorch')

MODELS = {
    # The 'test' preset has a static and a dynamic block.
    'weightformer': lambda: WeightFormer(arch='test', out_type='featmap'),
    'veca': lambda: VECA(arch='test', out_type='featmap'),
}


def run(model, x, backend, monkeypatch, bf16=False):
    monkeypatch.setenv(BACKEND_VARIABLE, backend)
    forget_choices()
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16, enabled=bf16):
        out = model(x)
    return out[-1].float(), cpu_choices()


@pytest.mark.parametrize('name', sorted(MODELS))
@pytest.mark.parametrize('batch', [1, 2])  # one image: WeightFormer's dynamic linear is a linear
def test_onednn_equals_the_reference_in_float32(name, batch, monkeypatch):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    x = torch.randn(batch, 3, 64, 48)
    reference, _ = run(model, x, 'pytorch', monkeypatch)
    fused, _ = run(model, x, 'onednn', monkeypatch)
    torch.testing.assert_close(fused, reference, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('name', sorted(MODELS))
def test_onednn_equals_the_reference_under_bfloat16_autocast(name, monkeypatch):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    x = torch.randn(1, 3, 64, 48)
    reference, _ = run(model, x, 'pytorch', monkeypatch, bf16=True)
    fused, _ = run(model, x, 'onednn', monkeypatch, bf16=True)
    scale = reference.abs().max()
    assert (fused - reference).abs().max() <= 0.05 * scale


@pytest.mark.parametrize('name', sorted(MODELS))
def test_a_measured_choice_serves_whole_and_streamed_alike(name, monkeypatch):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    x = torch.randn(1, 3, 64, 48)
    monkeypatch.setenv(BACKEND_VARIABLE, 'auto')
    forget_choices()
    with torch.no_grad():
        whole = model(x)[-1]
        streamed = model.forward_streamed(x, band_rows=2)[-1]
    kinds = {key[1] for key in cpu_choices()}
    assert kinds == ({'gelu', None} if name == 'weightformer' else {'swiglu', None})
    torch.testing.assert_close(streamed, whole, atol=1e-5, rtol=1e-5)
