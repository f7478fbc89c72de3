"""OneDNNLinear: an nn.Linear whose CPU inference runs mmlinear.ops.onednn_linear."""
import torch
import torch.nn.functional as F

from mmlinear.models.layers import OneDNNLinear


def test_the_layer_keeps_the_linear_state_dict():
    layer = OneDNNLinear(48, 80)
    assert isinstance(layer, torch.nn.Linear)
    assert set(layer.state_dict()) == {'weight', 'bias'}


def test_inference_equals_f_linear_and_training_is_f_linear_exactly():
    layer = OneDNNLinear(48, 80)
    x = torch.randn(3, 5, 48)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
    out = layer(x.requires_grad_())
    assert torch.equal(out, F.linear(x, layer.weight, layer.bias))
    out.sum().backward()
    assert x.grad is not None and layer.weight.grad is not None
