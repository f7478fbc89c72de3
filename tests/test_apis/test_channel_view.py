"""ChannelView: chosen channels of an image, reordered and scaled, read by rows."""
import numpy as np
import pytest

from mmlinear.apis.channel_view import ChannelView


class RowsOnly:
    """An (H, W, C) image that records the rows it is read for."""

    def __init__(self, data):
        self.data, self.shape, self.reads = data, data.shape, []

    def __getitem__(self, rows):
        assert isinstance(rows, slice)
        self.reads.append((rows.start, rows.stop))
        return self.data[rows]


def test_channels_in_the_given_order_scaled_and_read_by_rows():
    data = np.arange(5 * 3 * 4, dtype=np.uint16).reshape(5, 3, 4) * 1000
    source = RowsOnly(data)
    view = ChannelView(source, (2, 1, 0), 255 / 65535)
    assert view.shape == (5, 3, 3) and view.dtype == np.float32
    rows = view[1:3]
    assert source.reads == [(1, 3)]
    assert rows.dtype == np.float32 and rows.shape == (2, 3, 3)
    np.testing.assert_allclose(rows, data[1:3][..., [2, 1, 0]] * (255 / 65535), rtol=1e-6)


@pytest.mark.parametrize('channels', [(), (0, 4), (-1, )])
def test_channels_the_image_does_not_have_are_refused(channels):
    with pytest.raises(
            ValueError, match=r'channel indices in \[0, 3\] \(the image has 4 channels\)'):
        ChannelView(np.zeros((2, 2, 4)), channels)


def test_only_row_slices_and_hwc_images():
    with pytest.raises(ValueError, match=r'an \(H, W, C\) image, got shape \(2, 2\)'):
        ChannelView(np.zeros((2, 2)), (0, ))
    with pytest.raises(IndexError, match='slices by rows only'):
        ChannelView(np.zeros((2, 2, 3)), (0, ))[0]


def test_the_retired_spellings_warn_and_give_the_same_view():
    data = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    with pytest.warns(FutureWarning, match="'BandView' is deprecated .* use 'ChannelView'"):
        from mmlinear.apis.band_view import BandView
    assert BandView is ChannelView
    with pytest.warns(FutureWarning, match="'bands' is deprecated .* use 'channels'"):
        old = ChannelView(data, bands=(3, 0), scale=2.0)
    np.testing.assert_array_equal(old[0:2], ChannelView(data, channels=(3, 0), scale=2.0)[0:2])
