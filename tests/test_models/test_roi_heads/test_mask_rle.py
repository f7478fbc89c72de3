"""region_to_rle (a box region's mask as COCO RLE of the whole image) against
pycocotools.mask.encode of the whole-image mask."""
import numpy as np
import pytest
from pycocotools import mask as mask_util

from mmlinear.models.roi_heads import region_to_rle


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


def test_empty_region_and_region_outside_the_image():
    empty = region_to_rle(np.zeros((0, 3), bool), 5, 16, (12, 16))
    assert not mask_util.decode(empty).any()
    with pytest.raises(ValueError, match=r'a region of 4 x 6 at \(10, 5\) leaves the 12 x 16'):
        region_to_rle(np.ones((4, 6), bool), 10, 5, (12, 16))
