"""WeightFormer's dynamic layers against the formulas of the official code (Bilateral
Activation, Spatially Adaptive Prediction).

Equality checks run in float64, where rounding cannot hide a wrong formula.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from mmlinear.models.layers import DynamicDWConv, DynamicLinear, pool_tokens_2x2

f64 = torch.float64


def dyn_linear(in_features=16, out_features=64, scale=None):
    torch.manual_seed(0)
    layer = DynamicLinear(in_features, out_features).double()
    if scale is not None:
        # Larger predictor weights than the near-silent init, so dW matters.
        with torch.no_grad():
            for param in (layer.wfm.weight, layer.wfm.bias, layer.w1, layer.w2):
                param.normal_(0, scale)
    return layer


def dyn_dwconv(embed_dims=8, scale=None):
    torch.manual_seed(0)
    layer = DynamicDWConv(embed_dims).double()
    if scale is not None:
        with torch.no_grad():
            for param in layer.wfm.parameters():
                param.normal_(0, scale)
    return layer


def tokens(B, hw, C, seed=1):
    torch.manual_seed(seed)
    return torch.randn(B, hw[0] * hw[1], C, dtype=f64)


def formula_delta_w(layer, x, hw):
    """Section 3.2 written out: 2x2 block means (odd edge dropped), fused predictor, SiLU on
    both factors, a sum of outer products scaled by C^-1/2 / N, column soft-normalisation."""
    B, N, C = x.shape
    H, W = hw
    grid = x.reshape(B, H, W, C)[:, :H // 2 * 2, :W // 2 * 2]
    pooled = (grid[:, 0::2, 0::2] + grid[:, 1::2, 0::2] + grid[:, 0::2, 1::2] +
              grid[:, 1::2, 1::2]).reshape(B, -1, C) / 4
    pred = pooled @ layer.wfm.weight.T + layer.wfm.bias
    a, g = pred[..., :C // 4], pred[..., C // 4:]
    u = F.silu(a) @ layer.w1
    v = F.silu(g) @ layer.w2
    delta = torch.einsum('bmi,bmo->bio', u, v) * C**-0.5 / N
    return delta / (delta.norm(dim=1, keepdim=True) + 1)


# --------------------------------------------------------------------------------------------
# DynamicLinear
# --------------------------------------------------------------------------------------------


def test_dynamic_linear_parameters_follow_the_checkpoint_layout():
    """Section 2.5: w (in, out), b (out), w1 (in/4, in), w2 (out/4, out), fused wfm with bias."""
    layer = DynamicLinear(192, 768)
    shapes = {k: tuple(v.shape) for k, v in layer.state_dict().items()}
    assert shapes == {
        'w': (192, 768),
        'b': (768, ),
        'w1': (48, 192),
        'w2': (192, 768),
        'wfm.weight': (48 + 192, 192),
        'wfm.bias': (48 + 192, )
    }
    assert sum(p.numel() for p in layer.parameters()) == 351_216
    assert DynamicLinear(8).w.shape == (8, 8)


@pytest.mark.parametrize('hw', [(4, 6), (5, 7), (3, 2)])
def test_dynamic_linear_matches_the_reference_formula(hw):
    layer = dyn_linear(scale=0.5)
    x = tokens(2, hw, 16)
    expected_delta = formula_delta_w(layer, x, hw)
    delta = layer.predict_delta(x, hw)
    assert delta.shape == (2, 16, 64)
    torch.testing.assert_close(delta, expected_delta)
    # The dynamic part is far from negligible here, so the check has teeth.
    assert delta.abs().max() > 0.05
    out = layer(x, hw)
    assert out.shape == (2, hw[0] * hw[1], 64)
    torch.testing.assert_close(out, x @ (layer.w + expected_delta) + layer.b)


def test_pooling_matches_avgpool2d_and_drops_the_odd_edge():
    x = tokens(2, (5, 7), 3)
    pooled, valid = pool_tokens_2x2(x, (5, 7))
    reference = torch.nn.AvgPool2d(2)(x.transpose(1, 2).reshape(2, 3, 5, 7))
    assert valid is None and pooled.shape == (2, 2 * 3, 3)
    torch.testing.assert_close(pooled, reference.flatten(2).transpose(1, 2))
    # Changing the last (dropped) row and column does not change the pool.
    grid = x.reshape(2, 5, 7, 3).clone()
    grid[:, 4] += 10
    grid[:, :, 6] -= 10
    torch.testing.assert_close(pool_tokens_2x2(grid.reshape(2, 35, 3), (5, 7))[0], pooled)


def test_divisor_is_the_full_token_count_on_odd_grids():
    """The reference divides by N (35 here), not by 4 M (24): dW shrinks by 24 / 35."""
    layer = dyn_linear(scale=0.01)
    x = tokens(1, (5, 7), 16)
    even = x.reshape(1, 5, 7, 16)[:, :4, :6].reshape(1, 24, 16)
    # Tiny predictor weights: the column normalisation is ~identity, so dW is ~linear.
    ratio = layer.predict_delta(x, (5, 7)) / layer.predict_delta(even, (4, 6))
    torch.testing.assert_close(ratio, torch.full_like(ratio, 24 / 35), rtol=1e-3, atol=0)


def test_grid_without_a_2x2_block_gives_the_static_layer():
    layer = dyn_linear(scale=0.5)
    x = tokens(2, (1, 5), 16)
    assert layer.predict_delta(x, (1, 5)).abs().max() == 0
    torch.testing.assert_close(layer(x, (1, 5)), x @ layer.w + layer.b)


def test_dynamic_linear_reduces_to_static_when_the_predictor_is_zero():
    """SiLU(0) = 0, so U = V = 0 and dW = 0: the layer is x @ w + b exactly."""
    layer = dyn_linear(scale=0.5)
    x = tokens(3, (4, 4), 16)
    assert (layer(x, (4, 4)) - (x @ layer.w + layer.b)).abs().max() > 1e-3
    with torch.no_grad():
        layer.wfm.weight.zero_()
        layer.wfm.bias.zero_()
    assert torch.equal(layer(x, (4, 4)), x @ layer.w + layer.b)


def test_dynamic_linear_samples_are_independent():
    layer = dyn_linear(scale=0.5)
    batch = tokens(3, (4, 6), 16)
    out = layer(batch, (4, 6))
    for i in range(3):
        torch.testing.assert_close(out[i:i + 1], layer(batch[i:i + 1], (4, 6)))
    # ... and the weight does depend on the sample.
    delta = layer.predict_delta(batch, (4, 6))
    assert (delta[0] - delta[1]).abs().max() > 1e-3


def test_dynamic_linear_resolution_invariance_for_constant_inputs():
    """Identical tokens: M / N = 1/4 at every even grid, so dW does not change."""
    layer = dyn_linear(scale=0.5)
    torch.manual_seed(2)
    vector = torch.randn(1, 1, 16, dtype=f64)
    deltas = [
        layer.predict_delta(vector.expand(1, h * w, 16), (h, w))
        for h, w in [(14, 14), (28, 28), (6, 10)]
    ]
    assert deltas[0].abs().max() > 0.05
    for delta in deltas[1:]:
        torch.testing.assert_close(delta, deltas[0])


def test_dw_is_invariant_to_2x2_block_shuffles_only():
    layer = dyn_linear(scale=0.5)
    x = tokens(1, (4, 6), 16)
    delta = layer.predict_delta(x, (4, 6))
    blocks = x.reshape(1, 2, 2, 3, 2, 16).permute(0, 1, 3, 2, 4, 5).reshape(1, 6, 4, 16)
    shuffled = blocks[:, [4, 2, 5, 0, 3, 1]].reshape(1, 2, 3, 2, 2, 16)
    shuffled = shuffled.permute(0, 1, 3, 2, 4, 5).reshape(1, 24, 16)
    assert not torch.equal(shuffled, x)
    torch.testing.assert_close(layer.predict_delta(shuffled, (4, 6)), delta)
    # Swapping two tokens of different 2x2 blocks changes the pooled tokens and dW.
    swapped = x.clone()
    swapped[:, [0, 23]] = x[:, [23, 0]]
    assert (layer.predict_delta(swapped, (4, 6)) - delta).abs().max() > 1e-3


def test_dw_columns_have_norm_below_one():
    layer = dyn_linear(scale=0.5)
    x = 100 * tokens(2, (4, 6), 16)
    norms = layer.predict_delta(x, (4, 6)).norm(dim=1)
    assert norms.shape == (2, 64)
    # Large raw columns are pushed towards, but never reach, norm 1.
    assert norms.max() < 1 and norms.min() > 0.9


def test_dynamic_linear_macs_are_linear_in_the_token_count():
    """Section 3.3: 6.375 N C^2 MACs for C -> 4C, 940,032 per token at C = 384."""
    with torch.device('meta'):
        layer = DynamicLinear(384, 1536)
    for side in (14, 28, 56, 112):
        counter = FlopCounterMode(display=False)
        with counter:
            layer(torch.empty(1, side * side, 384, device='meta'), (side, side))
        assert counter.get_total_flops() // 2 == 940_032 * side * side
    static = torch.nn.Linear(384, 1536, device='meta')
    counter = FlopCounterMode(display=False)
    with counter:
        static(torch.empty(1, 196, 384, device='meta'))
    assert counter.get_total_flops() // 2 == 4 * 196 * 384 * 384


def test_dynamic_linear_padding_mask_reproduces_the_unpadded_weight():
    layer = dyn_linear(scale=0.5)
    x = tokens(1, (3, 5), 16)
    padded = torch.randn(1, 6, 8, 16, dtype=f64)
    padded[:, :3, :5] = x.reshape(1, 3, 5, 16)
    mask = torch.ones(1, 6, 8, dtype=torch.bool)
    mask[:, :3, :5] = False
    padded, mask = padded.reshape(1, 48, 16), mask.reshape(1, 48)
    torch.testing.assert_close(
        layer.predict_delta(padded, (6, 8), mask), layer.predict_delta(x, (3, 5)))
    # Without the mask the padding leaks into dW (the reference behaviour).
    assert (layer.predict_delta(padded, (6, 8)) - layer.predict_delta(x, (3, 5))).abs().max() > 1e-3


def test_dynamic_linear_errors():
    with pytest.raises(ValueError, match='divisible by rank_ratio'):
        DynamicLinear(10, 40)
    layer = DynamicLinear(8, 32)
    with pytest.raises(ValueError, match=r'\(B, H \* W, C\) with hw_shape \(3, 3\)'):
        layer(torch.randn(1, 8, 8), (3, 3))
    with pytest.raises(ValueError, match='padding_mask must be a bool tensor'):
        layer(torch.randn(1, 9, 8), (3, 3), torch.zeros(1, 9))
    with pytest.raises(ValueError, match="None or 'gelu'"):
        DynamicLinear(8, 32, activation='swiglu')


@pytest.mark.parametrize('batch', [1, 2])
@pytest.mark.parametrize('grad', [False, True])
def test_dynamic_linear_gelu_is_the_gelu_of_the_layer(batch, grad):
    torch.manual_seed(0)
    plain = DynamicLinear(8, 32)
    with_gelu = DynamicLinear(8, 32, activation='gelu')
    with_gelu.load_state_dict(plain.state_dict())
    x = torch.randn(batch, 12, 8)
    with torch.set_grad_enabled(grad):
        # batch 1 at inference is one linear layer, its GELU possibly fused by the backend
        torch.testing.assert_close(
            with_gelu(x, (3, 4)), F.gelu(plain(x, (3, 4))), atol=1e-6, rtol=1e-5)


# --------------------------------------------------------------------------------------------
# DynamicDWConv
# --------------------------------------------------------------------------------------------


def test_dynamic_dwconv_parameters_follow_the_checkpoint_layout():
    layer = DynamicDWConv(192)
    shapes = {k: tuple(v.shape) for k, v in layer.state_dict().items()}
    assert shapes == {
        'w': (192, 1, 3, 3),
        'b': (192, ),
        'wfm.0.weight': (192, 192, 1, 1),
        'wfm.0.bias': (192, ),
        'wfm.2.weight': (192, 192, 1, 1)
    }
    assert sum(p.numel() for p in layer.parameters()) == 75_840


@pytest.mark.parametrize('hw', [(14, 14), (5, 9), (1, 3)])
def test_dynamic_dwconv_matches_the_reference_formula(hw):
    """Section 4: adaptive pool to 3x3, 1x1 conv / GELU / 1x1 conv, Frobenius soft-norm, plus
    W0, then a depthwise conv per sample (written here as a loop over the samples)."""
    layer = dyn_dwconv(scale=0.5)
    x = tokens(2, hw, 8)
    x_map = x.transpose(1, 2).reshape(2, 8, *hw)
    raw = layer.wfm(torch.nn.AdaptiveAvgPool2d(3)(x_map))
    expected_delta = raw / (raw.pow(2).sum((2, 3), keepdim=True).sqrt() + 1)
    delta = layer.predict_delta(x, hw)
    assert delta.shape == (2, 8, 3, 3)
    torch.testing.assert_close(delta, expected_delta)
    assert delta.abs().max() > 0.05
    expected = torch.cat([
        F.conv2d(
            x_map[i:i + 1], layer.w + expected_delta[i, :, None], layer.b, padding=1, groups=8)
        for i in range(2)
    ])
    out = layer(x, hw)
    assert out.shape == x.shape
    torch.testing.assert_close(out, expected.flatten(2).transpose(1, 2))


def test_kernel_taps_are_predicted_from_their_own_pooled_region():
    """On 14 rows the adaptive bins are [0, 5), [4, 10), [9, 14): a change in rows and columns
    10-13 moves only the taps of bin (2, 2); the soft-norm rescales a channel's taps together,
    so the ratios of the other taps stay put."""
    layer = dyn_dwconv(scale=0.5)
    x = tokens(1, (14, 14), 8).reshape(1, 14, 14, 8)
    changed = x.clone()
    changed[:, 10:, 10:] += 3
    before = layer.predict_delta(x.reshape(1, 196, 8), (14, 14)).flatten(2)
    after = layer.predict_delta(changed.reshape(1, 196, 8), (14, 14)).flatten(2)
    torch.testing.assert_close(after[..., :8] / after[..., :1], before[..., :8] / before[..., :1])
    assert (after[..., 8] / after[..., 0] - before[..., 8] / before[..., 0]).abs().max() > 1e-2


def test_dynamic_dwconv_reduces_to_static_when_the_predictor_is_zero():
    layer = dyn_dwconv(scale=0.5)
    x = tokens(3, (6, 7), 8)
    x_map = x.transpose(1, 2).reshape(3, 8, 6, 7)
    static = F.conv2d(x_map, layer.w, layer.b, padding=1, groups=8).flatten(2).transpose(1, 2)
    assert (layer(x, (6, 7)) - static).abs().max() > 1e-3
    with torch.no_grad():
        layer.wfm[2].weight.zero_()
    torch.testing.assert_close(layer(x, (6, 7)), static, atol=1e-14, rtol=0)


def test_dynamic_dwconv_samples_are_independent():
    layer = dyn_dwconv(scale=0.5)
    batch = tokens(3, (5, 6), 8)
    out = layer(batch, (5, 6))
    for i in range(3):
        torch.testing.assert_close(out[i:i + 1], layer(batch[i:i + 1], (5, 6)))
    delta = layer.predict_delta(batch, (5, 6))
    assert (delta[0] - delta[1]).abs().max() > 1e-3


def test_dynamic_dwconv_resolution_invariance_for_constant_inputs():
    layer = dyn_dwconv(scale=0.5)
    torch.manual_seed(2)
    vector = torch.randn(1, 1, 8, dtype=f64)
    deltas = [layer.predict_delta(vector.expand(1, s * s, 8), (s, s)) for s in (14, 28, 15)]
    assert deltas[0].abs().max() > 0.05
    for delta in deltas[1:]:
        torch.testing.assert_close(delta, deltas[0])


def test_predicted_kernels_have_frobenius_norm_below_one():
    layer = dyn_dwconv(scale=0.5)
    norms = layer.predict_delta(100 * tokens(2, (6, 6), 8), (6, 6)).flatten(2).norm(dim=-1)
    assert norms.shape == (2, 8)
    assert norms.max() < 1 and norms.min() > 0.9


def test_dynamic_dwconv_macs():
    """Section 4: 2 * 9 * C^2 for the predictor (constant) plus 9 N C for the conv."""
    with torch.device('meta'):
        layer = DynamicDWConv(384)
    for side, expected in [(14, 3_331_584), (28, 5_363_712), (56, 13_492_224)]:
        counter = FlopCounterMode(display=False)
        with counter:
            layer(torch.empty(1, side * side, 384, device='meta'), (side, side))
        macs = counter.get_total_flops() // 2
        assert macs == 2 * 9 * 384**2 + 9 * side * side * 384 == expected


def test_dynamic_dwconv_padding_mask_reproduces_the_unpadded_output():
    """Sample 0 is a 5x4 grid padded to 9x7 (top-left valid), sample 1 fills the batch."""
    layer = dyn_dwconv(scale=0.5)
    small = tokens(1, (5, 4), 8).reshape(5, 4, 8)
    full = tokens(1, (9, 7), 8, seed=2)
    padded = torch.randn(9, 7, 8, dtype=f64)
    padded[:5, :4] = small
    batch = torch.stack([padded.reshape(63, 8), full[0]])
    mask = torch.zeros(2, 9, 7, dtype=torch.bool)
    mask[0] = True
    mask[0, :5, :4] = False
    out = layer(batch, (9, 7), mask.reshape(2, 63)).reshape(2, 9, 7, 8)
    torch.testing.assert_close(out[0, :5, :4],
                               layer(small.reshape(1, 20, 8), (5, 4)).reshape(5, 4, 8))
    torch.testing.assert_close(out[1].reshape(1, 63, 8), layer(full, (9, 7)))
    # Without the mask the padding leaks into the valid outputs (the reference behaviour).
    unmasked = layer(batch, (9, 7)).reshape(2, 9, 7, 8)
    assert (unmasked[0, :5, :4] - out[0, :5, :4]).abs().max() > 1e-3


def test_dynamic_dwconv_errors():
    with pytest.raises(ValueError, match='positive odd integer'):
        DynamicDWConv(8, kernel_size=4)
    with pytest.raises(ValueError, match=r'\(B, H \* W, C\)'):
        DynamicDWConv(8)(torch.randn(1, 10, 8), (3, 3))
