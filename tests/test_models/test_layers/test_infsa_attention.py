import pytest
import torch

from mmlinear.models.layers import InfSAAttention
from mmlinear.ops import linear_infsa_reference, pure_infsa_reference


def make(attn_type='linear', **kwargs):
    torch.manual_seed(0)
    return InfSAAttention(16, 4, attn_type=attn_type, **kwargs)


@pytest.mark.parametrize('attn_type', ['softmax', 'pure', 'linear', 'none'])
def test_output_shape_and_weights(attn_type):
    layer = make(attn_type)
    x = torch.randn(2, 9, 16)
    out, weights = layer(x, need_weights=True)
    assert out.shape == (2, 9, 16)
    expected = {'softmax': (2, 4, 9, 9), 'pure': (2, 4, 9, 9), 'linear': (2, 4, 9), 'none': None}
    assert (None if weights is None else tuple(weights.shape)) == expected[attn_type]
    # The explicit (weights) path and the op path agree.
    torch.testing.assert_close(layer(x), out, atol=1e-5, rtol=1e-5)


def test_layer_uses_the_reference_computation():
    layer = make('pure').double()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    q = layer.q_proj(x).reshape(2, 9, 4, 4).transpose(1, 2)
    k = layer.k_proj(x).reshape(2, 9, 4, 4).transpose(1, 2)
    v = layer.v_proj(x).reshape(2, 9, 4, 4).transpose(1, 2)
    heads = pure_infsa_reference(q, k, v, layer.rho).transpose(1, 2).reshape(2, 9, 16)
    torch.testing.assert_close(layer(x), layer.out_proj(heads))
    layer.attn_type = 'linear'
    heads = linear_infsa_reference(q, k, v, layer.rho).transpose(1, 2).reshape(2, 9, 16)
    torch.testing.assert_close(layer(x), layer.out_proj(heads))


@pytest.mark.parametrize('attn_type', ['pure', 'linear'])
@pytest.mark.parametrize('rho_mode,shape', [('per_head', (4, )), ('per_layer', (1, ))])
def test_rho_is_learnable_and_gets_gradient(attn_type, rho_mode, shape):
    layer = make(attn_type, rho_mode=rho_mode)
    assert layer.rho_logit.shape == shape
    torch.testing.assert_close(layer.rho, torch.full(shape, 0.95))
    layer(torch.randn(2, 9, 16)).pow(2).sum().backward()
    assert layer.rho_logit.grad is not None and layer.rho_logit.grad.abs().sum() > 0


def test_fixed_rho_is_a_buffer():
    layer = make('pure', rho_mode='fixed', rho_init=0.5)
    assert 'rho_logit' not in dict(layer.named_parameters())
    assert 'rho_logit' in dict(layer.named_buffers())
    torch.testing.assert_close(layer.rho, torch.tensor([0.5]))


def test_only_infsa_types_hold_rho():
    """Parameters that a type never uses would break DDP (unused-parameter error)."""
    assert not hasattr(make('softmax'), 'rho_logit')
    assert sum(p.numel() for p in make('none').parameters()) == 0
    with pytest.raises(ValueError, match='no rho'):
        make('softmax').rho


def test_tie_qk_removes_one_projection():
    untied = sum(p.numel() for p in make('linear').parameters())
    tied = sum(p.numel() for p in make('linear', tie_qk=True).parameters())
    assert untied - tied == 16 * 16 + 16


def test_key_padding_mask_isolates_valid_tokens():
    for attn_type in ('softmax', 'pure', 'linear'):
        layer = make(attn_type).eval()
        x = torch.randn(1, 6, 16)
        padded = torch.cat([x, torch.randn(1, 4, 16)], dim=1)
        mask = torch.tensor([[False] * 6 + [True] * 4])
        torch.testing.assert_close(layer(padded, mask)[:, :6], layer(x), atol=1e-5, rtol=1e-5)


def test_invalid_options_name_allowed_values():
    with pytest.raises(ValueError, match="allowed: 'softmax', 'pure', 'linear', 'none'"):
        InfSAAttention(16, 4, attn_type='flash')
    with pytest.raises(ValueError, match="allowed: 'per_head', 'per_layer', 'fixed'"):
        InfSAAttention(16, 4, rho_mode='global')
    with pytest.raises(ValueError, match='divisible'):
        InfSAAttention(16, 3)
    with pytest.raises(ValueError, match='rho_init'):
        InfSAAttention(16, 4, rho_init=1.0)
