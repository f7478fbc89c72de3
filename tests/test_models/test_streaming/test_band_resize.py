"""Bands of a bilinear resize (resize_band, from only the rows source_span names) against
``F.interpolate`` of the whole map, and the span arithmetic."""
import pytest
import torch
import torch.nn.functional as F

from mmlinear.models.streaming.band_resize import (crop_band, expand_span, resize_band, source_span,
                                                   union_span)
from mmlinear.models.streaming.token_stream import row_bands


@pytest.mark.parametrize('src, dst', [((5, 7), (10, 14)), ((13, 9), (25, 17)), ((25, 17), (13, 9)),
                                      ((3, 4), (64, 60)), ((8, 8), (8, 8)), ((1, 3), (4, 5))])
@pytest.mark.parametrize('align_corners', [False, True])
@pytest.mark.parametrize('band_rows', [1, 3, 7])
def test_bands_from_their_source_rows_equal_the_whole_resize(src, dst, align_corners, band_rows):
    """Up and down, integer and odd ratios (a 0.5 max-pool rounds up, so 2h - 1 rows come
    back), one source row; each band is made from exactly the rows source_span names."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, *src, dtype=torch.float64)
    whole = F.interpolate(x, size=dst, mode='bilinear', align_corners=align_corners)
    for span in row_bands(dst[0], band_rows):
        lo, hi = source_span(span, src[0], dst[0], align_corners)
        band = resize_band(x[:, :, lo:hi], lo, span, src[0], dst, align_corners)
        torch.testing.assert_close(band, whole[:, :, span[0]:span[1]], rtol=1e-12, atol=1e-12)


def test_float32_bands_match_to_rounding():
    torch.manual_seed(0)
    x = torch.randn(1, 4, 37, 23)
    whole = F.interpolate(x, size=(74, 45), mode='bilinear', align_corners=False)
    band = resize_band(x, 0, (10, 30), 37, (74, 45), False)
    torch.testing.assert_close(band, whole[:, :, 10:30], rtol=1e-5, atol=1e-5)


def test_source_span_is_the_rows_read():
    # Doubling: output rows 4..7 read rows 1..4 (the halves at 4 and 7 reach one further).
    assert source_span((4, 8), 10, 20, False) == (1, 5)
    # The bottom rows repeat the last source row.
    assert source_span((18, 20), 10, 20, False) == (8, 10)
    # With align_corners row 0 sits on source row 0; its second tap (weight 0) is row 1.
    assert source_span((0, 1), 10, 20, True) == (0, 2)


def test_span_arithmetic_and_cropping():
    assert expand_span((0, 4), 1, 10) == (0, 5)
    assert expand_span((3, 10), 2, 10) == (1, 10)
    assert union_span((2, 5), (4, 9)) == (2, 9)
    band = torch.arange(10.).view(1, 1, 10, 1)[:, :, 3:8]
    assert crop_band(band, 3, (4, 6)).flatten().tolist() == [4., 5.]
    with pytest.raises(ValueError, match=r'not all in the band of rows \[3, 8\)'):
        crop_band(band, 3, (2, 6))


def test_a_band_without_its_source_rows_is_refused():
    x = torch.randn(1, 1, 10, 4)
    with pytest.raises(ValueError, match=r'reads source rows \[1, 5\), not all in the band'):
        resize_band(x[:, :, 2:5], 2, (4, 8), 10, (20, 4), False)
    with pytest.raises(ValueError, match=r'rows \[18, 22\) lie outside a map of 20 rows'):
        resize_band(x, 0, (18, 22), 10, (20, 4), False)
