"""3 x 3 depthwise convolutions over bands of rows with a one-row halo (band_conv3x3) against
the whole-map convolution: WeightFormerBlock's static ``dwc`` and DynamicDWConv's kernels.

float64 to 1e-12 relative, float32 to 1e-5 (errors relative to the largest entry).
"""
from functools import partial

import pytest
import torch
from band_cases import assert_relative_close, bands, dyn_dwconv, token_mask

from mmlinear.models.layers import WeightFormerBlock, band_conv3x3
from mmlinear.models.utils import tokens_to_map
from mmlinear.ops import dynamic_dwconv2d

TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}


def conv_by_bands(conv, x_map, band_list):
    """Each band with the rows above and below it (none at the border), stacked back."""
    H = x_map.shape[2]
    outs = []
    for r0, r1 in band_list:
        above = x_map[:, :, r0 - 1:r0] if r0 > 0 else None
        below = x_map[:, :, r1:r1 + 1] if r1 < H else None
        outs.append(band_conv3x3(conv, x_map[:, :, r0:r1], above, below))
    return torch.cat(outs, dim=2)


def static_block(dtype):
    torch.manual_seed(0)
    return WeightFormerBlock(8, 32, dynamic=False).to(dtype)


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('hw', [(7, 5), (13, 9)])
@pytest.mark.parametrize('band_rows', [1, 2, 3, None])
@pytest.mark.parametrize('kind', ['static', 'conv2d', 'dynamic'])
def test_bands_give_the_whole_map_convolution(dtype, hw, band_rows, kind):
    """The block's ``_static_dwconv``, its ``nn.Conv2d`` itself, and the per-sample kernels;
    heights 1, 2, 3 (dividing neither 7 nor 13) and the whole map, on the token layout."""
    torch.manual_seed(1)
    x = torch.randn(2, hw[0] * hw[1], 8, dtype=dtype)
    if kind == 'dynamic':
        layer = dyn_dwconv(dtype)
        kernels = layer.predict_delta(x, hw) + layer.w.squeeze(1)
        conv = partial(dynamic_dwconv2d, weight=kernels, bias=layer.b)
    else:
        block = static_block(dtype)
        conv = block._static_dwconv if kind == 'static' else block.dwc
    x_map = tokens_to_map(x, hw)
    with torch.no_grad():
        out = conv_by_bands(conv, x_map, bands(hw[0], band_rows or hw[0]))
        expected = conv(x_map)
    assert out.shape == x_map.shape and out.dtype == dtype
    assert_relative_close(out, expected, TOLERANCE[dtype])


def test_without_its_halo_a_band_is_wrong_at_its_edges():
    block = static_block(torch.float64)
    x_map = torch.randn(1, 8, 7, 5, dtype=torch.float64) + 1
    with torch.no_grad():
        expected = block.dwc(x_map)[:, :, 2:5]
        no_halo = band_conv3x3(block.dwc, x_map[:, :, 2:5])
    assert (no_halo[:, :, [0, 2]] - expected[:, :, [0, 2]]).abs().min() > 0
    torch.testing.assert_close(no_halo[:, :, 1], expected[:, :, 1], rtol=1e-12, atol=0)


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('band_rows', [1, 4])
def test_dynamic_dwconv_streamed_with_a_token_padding_mask(dtype, band_rows):
    """DynamicDWConv's forward in two passes over bands: the pooled sums of the zero-filled
    tokens, then the convolution of each band with its halo; padded tokens hold noise."""
    hw = (13, 9)
    layer = dyn_dwconv(dtype)
    torch.manual_seed(1)
    x = torch.randn(2, hw[0] * hw[1], 8, dtype=dtype)
    mask = token_mask([(18, 11), (52, 30)], hw)
    assert mask[0].any() and mask[1].any()
    expected = tokens_to_map(layer(x, hw, mask), hw)
    x_map = tokens_to_map(x.masked_fill(mask[..., None], 0), hw)
    band_list = bands(hw[0], band_rows)
    sums = layer.pool_sums(hw, mask)
    for r0, r1 in band_list:
        sums.add(x_map[:, :, r0:r1], r0)
    kernels = layer.delta_from_pooled(sums.result()) + layer.w.squeeze(1)
    out = conv_by_bands(partial(dynamic_dwconv2d, weight=kernels, bias=layer.b), x_map, band_list)
    assert_relative_close(out, expected, TOLERANCE[dtype])


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_static_mixer_streamed_with_a_token_padding_mask(dtype):
    """The static block's residual mixer ``x + dwc(zero-filled x)`` band by band."""
    hw = (7, 5)
    block = static_block(dtype)
    torch.manual_seed(1)
    x = torch.randn(2, hw[0] * hw[1], 8, dtype=dtype)
    mask = token_mask([(20, 12), (28, 20)], hw)
    x_map = tokens_to_map(x, hw)
    filled = tokens_to_map(x.masked_fill(mask[..., None], 0), hw)
    with torch.no_grad():
        expected = x_map + block._static_dwconv(filled)
        out = x_map + conv_by_bands(block._static_dwconv, filled, bands(7, 2))
    assert_relative_close(out, expected, TOLERANCE[dtype])


def test_band_conv_errors_name_the_problem():
    conv = static_block(torch.float64).dwc
    band = torch.randn(1, 8, 2, 5, dtype=torch.float64)
    with pytest.raises(ValueError, match=r'halo row above must be one row .* \(1, 8, 1, 5\)'):
        band_conv3x3(conv, band, above=band)
    with pytest.raises(ValueError, match='halo row below'):
        band_conv3x3(conv, band, below=band[..., :4][:, :, :1])
    with pytest.raises(ValueError, match='rows >= 1'):
        band_conv3x3(conv, band[:, :, :0])
    unpadded = torch.nn.Conv2d(8, 8, 3, groups=8).double()
    with pytest.raises(ValueError, match=r'keep the map size.*\(4, 5\) map gave \(2, 3\)'):
        band_conv3x3(unpadded, band, band[:, :, :1], band[:, :, 1:])
