"""SimpleFeaturePyramid.forward_rows (a band of one level from the backbone rows it needs)
against the rows of forward()."""
import pytest
import torch

from mmlinear.models import SimpleFeaturePyramid
from mmlinear.models.streaming.token_stream import row_bands


def randomised(neck):
    """LayerNorm2d weights away from 1 / 0, so a row read from the wrong place shows."""
    torch.manual_seed(1)
    with torch.no_grad():
        for param in neck.parameters():
            param.add_(torch.randn_like(param) * 0.3)
    return neck.double().eval()


@pytest.mark.parametrize('map_shape', [(5, 7), (6, 4), (1, 3)])
@pytest.mark.parametrize('options', [
    dict(),
    dict(scale_factors=(2.0, 1.0, 0.5)),
    dict(out_channels=8, num_outs=5),
])
@pytest.mark.parametrize('band_rows', [1, 2, 5])
def test_rows_of_every_level_equal_the_whole_pyramid(map_shape, options, band_rows):
    """Odd heights (the 0.5 max-pool and the extra levels round up), the 3 x 3 output convs'
    halo, one-row bands; the map is read only through read_map."""
    neck = randomised(SimpleFeaturePyramid(in_channels=16, **options))
    x = torch.randn(2, 16, *map_shape, dtype=torch.float64)
    whole = neck(x)
    read = []

    def read_map(span):
        read.append(span)
        return x[:, :, span[0]:span[1]]

    assert neck.level_shapes(map_shape) == [tuple(o.shape[2:]) for o in whole]
    for level, expected in enumerate(whole):
        for span in row_bands(expected.shape[2], band_rows):
            rows = neck.forward_rows(read_map, map_shape, level, span)
            torch.testing.assert_close(
                rows, expected[:, :, span[0]:span[1]], rtol=1e-12, atol=1e-12)
    assert all(0 <= start < stop <= map_shape[0] for start, stop in read)


def test_bad_levels_and_rows_are_refused():
    neck = SimpleFeaturePyramid(in_channels=16)
    x = torch.randn(1, 16, 4, 4)
    with pytest.raises(ValueError, match=r'level must be in \[0, 4\), got 4'):
        neck.forward_rows(lambda s: x[:, :, s[0]:s[1]], (4, 4), 4, (0, 1))
    with pytest.raises(ValueError, match=r'rows \[0, 17\) lie outside a map of 16 rows'):
        neck.forward_rows(lambda s: x[:, :, s[0]:s[1]], (4, 4), 0, (0, 17))
