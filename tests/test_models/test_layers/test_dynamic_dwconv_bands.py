"""DynamicDWConv's kernels from rows pooled band by band (``pool_sums``) against
``predict_delta``: float64 to 1e-12 relative, float32 to 1e-5 (errors relative to the largest
entry)."""
import pytest
import torch
from band_cases import assert_relative_close, bands, dyn_dwconv

from mmlinear.models.utils import pixel_padding_mask, pixel_to_token_mask

TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('hw', [(7, 5), (13, 9)])
@pytest.mark.parametrize('with_mask', [False, True])
def test_kernels_from_bands_equal_predict_delta(dtype, hw, with_mask):
    layer = dyn_dwconv(dtype)
    torch.manual_seed(1)
    x = torch.randn(2, hw[0] * hw[1], 8, dtype=dtype)
    mask = None
    if with_mask:
        pixels = pixel_padding_mask([(18, 11), (hw[0] * 4, hw[1] * 4)], (hw[0] * 4, hw[1] * 4))
        mask = pixel_to_token_mask(pixels, 4)
    x_map = x.transpose(1, 2).reshape(2, 8, *hw)
    sums = layer.pool_sums(hw, mask)
    for r0, r1 in bands(hw[0], 3):
        sums.add(x_map[:, :, r0:r1], r0)
    delta = layer.delta_from_pooled(sums.result())
    assert delta.shape == (2, 8, 3, 3) and delta.dtype == dtype
    expected = layer.predict_delta(x, hw, mask)
    assert expected.abs().max() > 0.05
    assert_relative_close(delta, expected, TOLERANCE[dtype])
