"""DynamicLinear's weight change streamed over bands of token rows against the whole grid.

The sums of bands that tile the rows (``delta_sums``), finished once, must give
``predict_delta``: to 1e-12 relative in float64 and 1e-5 in float32 (errors relative to the
largest entry).
"""
import pytest
import torch
from band_cases import assert_relative_close, bands, token_mask

from mmlinear.models.layers import DynamicLinear

TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}


def dyn_linear(dtype, in_features=16, out_features=64):
    torch.manual_seed(0)
    layer = DynamicLinear(in_features, out_features).to(dtype)
    # Larger predictor weights than the near-silent init, so dW is far from 0 and the column
    # normalisation far from the identity.
    with torch.no_grad():
        for param in (layer.wfm.weight, layer.wfm.bias, layer.w1, layer.w2):
            param.normal_(0, 0.5)
    return layer


def streamed_delta(layer, x, hw, band_list, mask=None):
    """Pass 1 of streamed inference: the bands added to the layer's accumulator, finished
    once."""
    B, _, C = x.shape
    W = hw[1]
    grid = x.reshape(B, hw[0], W, C)
    sums = layer.delta_sums(hw)
    for r0, r1 in band_list:
        band_mask = None if mask is None else mask.reshape(B, hw[0], W)[:, r0:r1].reshape(B, -1)
        sums.add(grid[:, r0:r1].reshape(B, -1, C), (r0, r1), band_mask)
    return sums.result()


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('hw', [(7, 5), (13, 9), (8, 6)])
@pytest.mark.parametrize('band_rows', [2, 4, 6, None])
def test_bands_give_the_whole_grid_delta(dtype, hw, band_rows):
    """Heights 2 (the least for an even start), 4 and 6 (not dividing 7, 13 or 8) and the
    whole grid; the band with an odd grid's last row has an odd height."""
    layer = dyn_linear(dtype)
    torch.manual_seed(1)
    x = torch.randn(2, hw[0] * hw[1], 16, dtype=dtype)
    delta = streamed_delta(layer, x, hw, bands(hw[0], band_rows or hw[0]))
    assert delta.shape == (2, 16, 64) and delta.dtype == dtype
    assert_relative_close(delta, layer.predict_delta(x, hw), TOLERANCE[dtype], min_scale=0.02)


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_one_row_band_holding_the_last_row_of_an_odd_grid(dtype):
    """The one legal band of one row: it pools nothing (the row is dropped, as by
    AvgPool2d(2)), but its W tokens count in N."""
    layer = dyn_linear(dtype)
    torch.manual_seed(1)
    x = torch.randn(2, 7 * 5, 16, dtype=dtype)
    last_row = x.reshape(2, 7, 5, 16)[:, 6:].reshape(2, 5, 16)
    part, num = layer.partial_delta_sum(last_row, (7, 5), (6, 7))
    assert torch.equal(part, torch.zeros_like(part)) and num.tolist() == [5, 5]
    delta = streamed_delta(layer, x, (7, 5), [(0, 4), (4, 6), (6, 7)])
    assert_relative_close(delta, layer.predict_delta(x, (7, 5)), TOLERANCE[dtype], min_scale=0.02)


def test_the_divisor_counts_the_dropped_row():
    """Leaving the last (odd) row's band out changes N from 35 to 30, hence dW."""
    layer = dyn_linear(torch.float64)
    torch.manual_seed(1)
    x = torch.randn(1, 35, 16, dtype=torch.float64)
    grid = x.reshape(1, 7, 5, 16)
    part, num = layer.partial_delta_sum(grid[:, :6].reshape(1, 30, 16), (7, 5), (0, 6))
    assert num.tolist() == [30]
    whole = layer.predict_delta(x, (7, 5))
    assert (layer.delta_from_sum(part, num) - whole).abs().max() > 1e-3
    assert_relative_close(layer.delta_from_sum(part, num + 5), whole, 1e-12, min_scale=0.02)


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('hw, img_shapes', [((7, 5), [(20, 12), (28, 20)]),
                                            ((13, 9), [(17, 33), (52, 36)])])
@pytest.mark.parametrize('band_rows', [2, 4, None])
def test_bands_with_a_token_padding_mask(dtype, hw, img_shapes, band_rows):
    """Images padded at the bottom / right (5 x 3 and 5 x 9 valid tokens: their last valid
    row leaves 2 x 2 blocks half padded) next to an unpadded one; each band takes its slice
    of the mask."""
    layer = dyn_linear(dtype)
    torch.manual_seed(1)
    x = torch.randn(2, hw[0] * hw[1], 16, dtype=dtype)
    mask = token_mask(img_shapes, hw)
    assert mask[0].any() and not mask[1].any()
    delta = streamed_delta(layer, x, hw, bands(hw[0], band_rows or hw[0]), mask)
    expected = layer.predict_delta(x, hw, mask)
    assert_relative_close(delta, expected, TOLERANCE[dtype], min_scale=0.02)
    # The mask matters: without it the padding leaks into the first image's weight.
    assert (layer.predict_delta(x, hw)[0] - expected[0]).abs().max() > 1e-3


def test_band_counts_with_a_mask_are_the_valid_tokens():
    layer = dyn_linear(torch.float64)
    mask = token_mask([(20, 12), (28, 20)], (7, 5)).reshape(2, 7, 5)
    x = torch.randn(2, 2 * 5, 16, dtype=torch.float64)
    _, num = layer.partial_delta_sum(x, (7, 5), (4, 6), mask[:, 4:6].reshape(2, 10))
    # Image 0 has 5 x 3 valid tokens: row 4 holds 3 of them, row 5 none.
    assert num.tolist() == [3, 10]


def test_partial_sums_accumulate_in_float32_under_autocast():
    """Under bf16 autocast the predictor runs in bf16, but the sums are float32, so bands and
    the whole grid agree to float32 rounding of the same bf16 factors."""
    layer = dyn_linear(torch.float32)
    torch.manual_seed(1)
    x = torch.randn(2, 13 * 9, 16)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        part, _ = layer.partial_delta_sum(x, (13, 9))
        whole = layer.predict_delta(x, (13, 9))
        streamed = streamed_delta(layer, x, (13, 9), bands(13, 4))
    assert part.dtype == torch.float32 and whole.dtype == torch.float32
    assert_relative_close(streamed, whole, 1e-3, min_scale=0.02)
    # And both are near the float32 result (the bf16 factors' rounding, no more).
    assert_relative_close(whole, layer.predict_delta(x, (13, 9)), 3e-2, min_scale=0.02)


def test_band_errors_name_the_problem():
    layer = dyn_linear(torch.float64)
    rows = torch.randn(1, 2 * 5, 16, dtype=torch.float64)
    with pytest.raises(ValueError, match='starts on an even row.*got start row 1'):
        layer.partial_delta_sum(rows, (7, 5), (1, 3))
    with pytest.raises(ValueError, match=r'end on an odd row.*row 2 would be split'):
        layer.partial_delta_sum(torch.randn(1, 3 * 5, 16, dtype=torch.float64), (8, 5), (0, 3))
    with pytest.raises(ValueError, match=r'non-empty range of the grid\'s 7 rows'):
        layer.partial_delta_sum(rows, (7, 5), (6, 8))
    with pytest.raises(ValueError, match=r'non-empty range'):
        layer.partial_delta_sum(rows[:, :0], (7, 5), (2, 2))
    # The band's tokens must be its rows times the grid's columns.
    with pytest.raises(ValueError, match=r'\(B, H \* W, C\) with hw_shape \(4, 5\)'):
        layer.partial_delta_sum(rows, (7, 5), (0, 4))
    with pytest.raises(ValueError, match='padding_mask must be a bool tensor'):
        layer.partial_delta_sum(rows, (7, 5), (0, 2), torch.zeros(1, 5, dtype=torch.bool))


def test_a_result_needs_a_band_first():
    with pytest.raises(RuntimeError, match='no tokens have been added'):
        dyn_linear(torch.float64).delta_sums((7, 5)).result()
