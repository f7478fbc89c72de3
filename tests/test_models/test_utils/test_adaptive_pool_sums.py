"""Adaptive average pooling accumulated over bands of rows (AdaptivePoolSums) against
``F.adaptive_avg_pool2d``: float64 to 1e-12 relative, float32 to 1e-5 (errors relative to the
largest entry)."""
import pytest
import torch
import torch.nn.functional as F

from mmlinear.models.streaming.token_stream import row_bands
from mmlinear.models.utils import (AdaptivePoolSums, pixel_padding_mask, pixel_to_token_mask,
                                   valid_extents)

TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}


def assert_relative_close(actual, expected, tol):
    scale = expected.abs().max().item()
    torch.testing.assert_close(actual, expected, rtol=0, atol=tol * scale)


def pooled_by_bands(x_map, band_list, extents=None, k=3):
    sums = AdaptivePoolSums(tuple(x_map.shape[2:]), k, extents)
    for r0, r1 in band_list:
        sums.add(x_map[:, :, r0:r1], r0)
    return sums.result()


def random_map(shape, dtype, seed=1):
    torch.manual_seed(seed)
    # An offset, so bin means are far from 0 and a missed or doubled row shows.
    return torch.randn(shape, dtype=dtype) + 1


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('hw', [(7, 5), (13, 9), (14, 14), (2, 4), (1, 3)])
@pytest.mark.parametrize('band_rows', [1, 2, 4, None])
def test_bands_give_adaptive_avg_pool2d(dtype, hw, band_rows):
    """7 and 13 rows give overlapping bins ([0, 3), [2, 5), [4, 7) on 7), 2 and 1 rows fewer
    rows than bins (a row in two or three bins); one-row bands split every bin."""
    x_map = random_map((2, 6, *hw), dtype)
    pooled = pooled_by_bands(x_map, row_bands(hw[0], band_rows or hw[0]))
    assert pooled.shape == (2, 6, 3, 3) and pooled.dtype == dtype
    assert_relative_close(pooled, F.adaptive_avg_pool2d(x_map, 3), TOLERANCE[dtype])


def test_bands_in_any_order_and_other_sizes():
    x_map = random_map((1, 4, 11, 10), torch.float64)
    band_list = row_bands(11, 3)[::-1]
    for k in (1, 3, 5):
        assert_relative_close(
            pooled_by_bands(x_map, band_list, k=k), F.adaptive_avg_pool2d(x_map, k), 1e-12)


def test_a_row_shared_by_two_bins_counts_in_both():
    """On 7 rows, row 2 is in bins 0 and 1: a band of that row alone moves both."""
    sums = AdaptivePoolSums((7, 5), 3)
    sums.add(torch.zeros(1, 1, 2, 5, dtype=torch.float64), 0)
    sums.add(torch.ones(1, 1, 1, 5, dtype=torch.float64), 2)
    sums.add(torch.zeros(1, 1, 4, 5, dtype=torch.float64), 3)
    rows = sums.result()[0, 0, :, 0]
    assert rows.tolist() == [1 / 3, 1 / 3, 0]


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('hw, img_shapes', [((7, 5), [(20, 12), (28, 20)]),
                                            ((13, 9), [(17, 33), (6, 5)])])
@pytest.mark.parametrize('band_rows', [1, 3, None])
def test_bands_over_each_images_valid_region(dtype, hw, img_shapes, band_rows):
    """Images padded at the bottom / right (tokens of a 4-pixel patch): each is pooled over
    its own top-left valid extent, with bins of that extent."""
    pixels = pixel_padding_mask(img_shapes, (hw[0] * 4, hw[1] * 4))
    extents = valid_extents(pixel_to_token_mask(pixels, 4), hw)
    x_map = random_map((2, 6, *hw), dtype)
    expected = torch.stack([
        F.adaptive_avg_pool2d(x_map[i, :, :h, :w], 3) for i, (h, w) in enumerate(extents.tolist())
    ])
    pooled = pooled_by_bands(x_map, row_bands(hw[0], band_rows or hw[0]), extents)
    assert_relative_close(pooled, expected, TOLERANCE[dtype])
    # The padding is left out: the pool of the whole map differs.
    assert (F.adaptive_avg_pool2d(x_map[:1], 3) - expected[:1]).abs().max() > 1e-2


def test_non_finite_padding_stays_out():
    extents = torch.tensor([[5, 3], [7, 5]])
    x_map = random_map((2, 4, 7, 5), torch.float64)
    expected = torch.stack(
        [F.adaptive_avg_pool2d(x_map[0, :, :5, :3], 3),
         F.adaptive_avg_pool2d(x_map[1], 3)])
    x_map[0, :, 5:] = float('nan')
    x_map[0, :, :, 3:] = float('inf')
    assert_relative_close(pooled_by_bands(x_map, row_bands(7, 2), extents), expected, 1e-12)


def test_sums_are_float32_under_autocast_and_for_half_bands():
    x_map = random_map((1, 4, 9, 6), torch.float32)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        pooled = pooled_by_bands(x_map, row_bands(9, 2))
    assert pooled.dtype == torch.float32
    assert_relative_close(pooled, F.adaptive_avg_pool2d(x_map, 3), 1e-5)
    half = pooled_by_bands(x_map.bfloat16(), row_bands(9, 2))
    assert half.dtype == torch.float32
    assert_relative_close(half, F.adaptive_avg_pool2d(x_map.bfloat16().float(), 3), 1e-5)


def test_pool_sums_errors_name_the_problem():
    band = torch.randn(1, 2, 2, 5, dtype=torch.float64)
    sums = AdaptivePoolSums((7, 5), 3)
    sums.add(band, 0)
    with pytest.raises(ValueError, match=r'rows \[1, 3\) overlap rows already added'):
        sums.add(band, 1)
    with pytest.raises(ValueError, match=r'rows \[6, 8\) are outside the grid\'s 7 rows'):
        sums.add(band, 6)
    with pytest.raises(ValueError, match=r"W' = 5"):
        sums.add(torch.randn(1, 2, 2, 4, dtype=torch.float64), 2)
    with pytest.raises(ValueError, match=r'\(B, C\) = \(1, 2\) as the bands before it'):
        sums.add(torch.randn(1, 3, 2, 5, dtype=torch.float64), 2)
    with pytest.raises(ValueError, match=r'rows \[2, 3, 4, 5, 6\] of the grid were never added'):
        sums.result()
    with pytest.raises(ValueError, match='extents must be'):
        AdaptivePoolSums((7, 5), 3, torch.tensor([[8, 5]]))
    with pytest.raises(ValueError, match='holds 2 images, the extents 1'):
        AdaptivePoolSums((7, 5), 3, torch.tensor([[7, 5]])).add(band.expand(2, -1, -1, -1), 0)
