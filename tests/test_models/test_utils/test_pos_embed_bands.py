"""BandPosEmbed: the rows of an interpolated position table without the whole table."""
import pytest
import torch

from mmlinear.models.utils import pos_embed_for_valid_regions, resize_pos_embed
from mmlinear.models.utils.pos_embed import BandPosEmbed


def table(src=(6, 5), channels=4, dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return torch.randn(1, 1 + src[0] * src[1], channels, generator=g, dtype=dtype)


@pytest.mark.parametrize('mode', ['bicubic', 'bilinear', 'nearest'])
@pytest.mark.parametrize('dst', [(11, 7), (6, 5), (3, 13)])
def test_band_rows_equal_the_whole_interpolation(mode, dst):
    pos = table()
    whole = resize_pos_embed(pos, (6, 5), dst, mode)[:, 1:]
    bands = BandPosEmbed(pos, (6, 5), dst, mode=mode)
    for start in range(dst[0]):
        stop = min(start + 2, dst[0])
        expected = whole[:, start * dst[1]:stop * dst[1]]
        torch.testing.assert_close(bands.rows(start, stop), expected, rtol=1e-13, atol=1e-13)
    assert torch.equal(bands.extra, pos[:, :1])


def test_band_rows_of_a_padded_batch_equal_the_per_image_tables():
    pos = table()
    valid = [(11, 7), (4, 3)]
    whole = pos_embed_for_valid_regions(pos, (6, 5), valid, (11, 7))[:, 1:]
    bands = BandPosEmbed(pos, (6, 5), (11, 7), valid)
    got = torch.cat([bands.rows(s, min(s + 3, 11)) for s in range(0, 11, 3)], dim=1)
    torch.testing.assert_close(got, whole, rtol=1e-13, atol=1e-13)


def test_float32_table_is_interpolated_in_float32():
    pos = table(dtype=torch.float32)
    whole = resize_pos_embed(pos, (6, 5), (9, 9))[:, 1:]
    got = BandPosEmbed(pos, (6, 5), (9, 9)).rows(0, 9)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, whole, rtol=1e-6, atol=1e-6)


def test_a_mode_that_is_not_separable_is_refused():
    with pytest.raises(ValueError, match="allowed: 'nearest', 'bilinear', 'bicubic'"):
        BandPosEmbed(table(), (6, 5), (9, 9), mode='area')
