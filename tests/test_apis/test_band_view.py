"""BandView: chosen bands of an image, reordered and scaled, read by rows."""
import numpy as np
import pytest

from mmlinear.apis.band_view import BandView


class RowsOnly:
    """An (H, W, C) image that records the rows it is read for."""

    def __init__(self, data):
        self.data, self.shape, self.reads = data, data.shape, []

    def __getitem__(self, rows):
        assert isinstance(rows, slice)
        self.reads.append((rows.start, rows.stop))
        return self.data[rows]


def test_bands_in_the_given_order_scaled_and_read_by_rows():
    data = np.arange(5 * 3 * 4, dtype=np.uint16).reshape(5, 3, 4) * 1000
    source = RowsOnly(data)
    view = BandView(source, (2, 1, 0), 255 / 65535)
    assert view.shape == (5, 3, 3) and view.dtype == np.float32
    rows = view[1:3]
    assert source.reads == [(1, 3)]
    assert rows.dtype == np.float32 and rows.shape == (2, 3, 3)
    np.testing.assert_allclose(rows, data[1:3][..., [2, 1, 0]] * (255 / 65535), rtol=1e-6)


@pytest.mark.parametrize('bands', [(), (0, 4), (-1, )])
def test_bands_the_image_does_not_have_are_refused(bands):
    with pytest.raises(ValueError, match=r'band indices in \[0, 3\] \(the image has 4 bands\)'):
        BandView(np.zeros((2, 2, 4)), bands)


def test_only_row_slices_and_hwc_images():
    with pytest.raises(ValueError, match=r'an \(H, W, C\) image, got shape \(2, 2\)'):
        BandView(np.zeros((2, 2)), (0, ))
    with pytest.raises(IndexError, match='slices by rows only'):
        BandView(np.zeros((2, 2, 3)), (0, ))[0]
