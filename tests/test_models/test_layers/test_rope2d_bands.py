"""Patch coordinates of a band of grid rows: exactly the band's slice of the whole grid's
coordinates (with and without per-image valid extents), and so are the band's RoPE angles."""
import pytest
import torch

from mmlinear.models.layers import Rope2D, patch_band_coords, patch_grid_coords
from mmlinear.models.streaming import band_tokens

VALID_HW = {
    (7, 5): [[4, 3], [7, 5], [1, 1]],
    (4, 6): [[2, 5], [4, 6], [3, 1]],
    (1, 3): [[1, 2], [1, 3], [1, 1]]
}


def all_bands(num_rows):
    return [(r0, r1) for r0 in range(num_rows) for r1 in range(r0 + 1, num_rows + 1)]


def test_band_tokens_are_the_rows_of_a_row_major_grid():
    assert band_tokens((7, 5), (2, 5)) == slice(10, 25)
    assert band_tokens((7, 5), (0, 7)) == slice(0, 35)
    assert band_tokens((7, 5), (6, 7)) == slice(30, 35)


@pytest.mark.parametrize('hw_shape', [(7, 5), (4, 6), (1, 3)])
@pytest.mark.parametrize('with_extents', [False, True])
def test_every_band_is_the_slice_of_the_whole_grid(hw_shape, with_extents):
    valid_hw = torch.tensor(VALID_HW[hw_shape]) if with_extents else None
    whole = patch_grid_coords(hw_shape, valid_hw)
    assert whole.shape == (3 if with_extents else 1, hw_shape[0] * hw_shape[1], 2)
    for rows in all_bands(hw_shape[0]):
        band = patch_band_coords(hw_shape, rows, valid_hw)
        assert band.shape == (whole.shape[0], (rows[1] - rows[0]) * hw_shape[1], 2)
        assert band.dtype == torch.float32
        assert torch.equal(band, whole[:, band_tokens(hw_shape, rows)])


def test_band_coordinates_follow_the_valid_grid():
    """Rows 2 and 3 of a 7 x 5 grid: an image with 4 valid rows and 3 valid columns has its
    y at (r + 0.5) / 4 * 2 - 1 and its x at (c + 0.5) / 3 * 2 - 1 (beyond 1 in the padding)."""
    band = patch_band_coords((7, 5), (2, 4), torch.tensor([[4, 3]]))[0].view(2, 5, 2)
    x = (torch.arange(5) + 0.5) / 3 * 2 - 1
    y = (torch.tensor([2., 3.]) + 0.5) / 4 * 2 - 1
    torch.testing.assert_close(band[..., 0], x.expand(2, 5), rtol=0, atol=1e-7)
    torch.testing.assert_close(band[..., 1], y[:, None].expand(2, 5), rtol=0, atol=1e-7)
    assert band[:, 3:, 0].min() > 1  # padded columns


def test_band_rope_angles_are_the_slice_of_the_whole_grid():
    rope = Rope2D(32).eval()
    hw_shape, valid_hw = (7, 5), torch.tensor(VALID_HW[(7, 5)])
    cos, sin = rope(patch_grid_coords(hw_shape, valid_hw))
    for rows in [(0, 1), (2, 5), (3, 7), (0, 7)]:
        band_cos, band_sin = rope(patch_band_coords(hw_shape, rows, valid_hw))
        tokens = band_tokens(hw_shape, rows)
        assert torch.equal(band_cos, cos[:, tokens]) and torch.equal(band_sin, sin[:, tokens])


@pytest.mark.parametrize('rows', [(-1, 2), (3, 3), (4, 2), (0, 8), (7, 8)])
def test_rows_outside_the_grid_are_refused(rows):
    message = rf'grid rows \[{rows[0]}, {rows[1]}\) lie outside the 7 rows'
    with pytest.raises(ValueError, match=message):
        band_tokens((7, 5), rows)
    with pytest.raises(ValueError, match=message):
        patch_band_coords((7, 5), rows)


@pytest.mark.parametrize('valid_hw', [torch.tensor([4, 3]), torch.tensor([[4, 3, 1]])])
def test_valid_extents_of_the_wrong_shape_are_refused(valid_hw):
    with pytest.raises(ValueError, match=r'valid_hw must be \(B, 2\)'):
        patch_band_coords((7, 5), (0, 2), valid_hw)
    with pytest.raises(ValueError, match=r'valid_hw must be \(B, 2\)'):
        patch_grid_coords((7, 5), valid_hw)
