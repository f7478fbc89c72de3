"""region_to_rle (a box region's mask as COCO RLE of the whole image) against
pycocotools.mask.encode of the whole-image mask."""
import numpy as np
import pytest
from pycocotools import mask as mask_util

from mmlinear.models.streaming.mask_rle import region_to_rle, rle_to_region


@pytest.mark.parametrize(
    'top, left, rows, columns',
    [
        (3, 5, 4, 6),  # inside
        (0, 0, 5, 4),  # from the first pixel
        (9, 12, 3, 4),  # to the last pixel
        (0, 0, 12, 16),  # the whole image
    ])
@pytest.mark.parametrize('fill', ['random', 'full', 'empty'])
def test_equals_encoding_the_whole_mask(top, left, rows, columns, fill):
    rng = np.random.default_rng(top * 100 + left)
    region = {
        'random': rng.random((rows, columns)) > 0.5,
        'full': np.ones((rows, columns), bool),
        'empty': np.zeros((rows, columns), bool),
    }[fill]
    whole = np.zeros((12, 16), dtype=np.uint8)
    whole[top:top + rows, left:left + columns] = region
    expected = mask_util.encode(np.asfortranarray(whole))
    got = region_to_rle(region, top, left, (12, 16))
    assert got['size'] == [12, 16]
    assert got['counts'] == expected['counts'].decode('ascii')
    assert np.array_equal(mask_util.decode(got), whole)
    # Back to the tight region, from the runs alone.
    region_back, row, column = rle_to_region(got)
    tight = np.zeros_like(whole, dtype=bool)
    tight[row:row + region_back.shape[0], column:column + region_back.shape[1]] = region_back
    assert np.array_equal(tight, whole.astype(bool))
    if whole.any():
        rows, columns = np.nonzero(whole)
        assert (row, column) == (rows.min(), columns.min())
        assert region_back.shape == (np.ptp(rows) + 1, np.ptp(columns) + 1)


def test_decodes_long_runs_of_large_images():
    """Runs over several columns and counts beyond one 5-bit group, differences negative."""
    rng = np.random.default_rng(0)
    whole = np.zeros((300, 40), dtype=np.uint8)
    whole[250:, 3:9] = 1  # runs that carry on into the next column's top
    whole[:20, 4:9] = 1
    whole[100:101, 20] = 1
    whole[120:200, 25:38] = rng.random((80, 13)) > 0.3
    region, row, column = rle_to_region(mask_util.encode(np.asfortranarray(whole)))
    rebuilt = np.zeros_like(whole)
    rebuilt[row:row + region.shape[0], column:column + region.shape[1]] = region
    assert np.array_equal(rebuilt, whole)


def test_empty_region_and_region_outside_the_image():
    empty = region_to_rle(np.zeros((0, 3), bool), 5, 16, (12, 16))
    assert not mask_util.decode(empty).any()
    with pytest.raises(ValueError, match=r'a region of 4 x 6 at \(10, 5\) leaves the 12 x 16'):
        region_to_rle(np.ones((4, 6), bool), 10, 5, (12, 16))
