"""UPerHeadBands (mmseg's UPerHead over bands of its finest level, pyramid pooling over the
whole top map or a window around each position) against ``UPerHead.forward`` /
``ContextWindowUPerHead.forward`` of the whole pyramid."""
import pytest
import torch
from mmseg.models.decode_heads import FCNHead, UPerHead

from mmlinear.models.decode_heads import ContextWindowUPerHead
from mmlinear.models.streaming.token_stream import row_bands
from mmlinear.models.streaming.uper_head_bands import UPerHeadBands


def uper_head(align_corners=False, in_channels=(8, 16, 16), head_type=UPerHead, **kwargs):
    torch.manual_seed(0)
    head = head_type(
        in_channels=list(in_channels),
        in_index=list(range(len(in_channels))),
        channels=8,
        num_classes=3,
        norm_cfg=dict(type='BN'),
        align_corners=align_corners,
        **kwargs)
    # Running statistics away from 0 / 1, so that eval-mode BN is not the identity.
    for module in head.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_(0, 0.5)
            module.running_var.uniform_(0.5, 2)
    return head.double().eval()


def pyramid(shapes, channels, seed=2):
    torch.manual_seed(seed)
    return [torch.randn(2, c, *shape, dtype=torch.float64) for c, shape in zip(channels, shapes)]


@pytest.mark.parametrize(
    'shapes',
    [
        [(14, 10), (7, 5), (4, 3)],  # a simple pyramid from an odd 7 x 5 map
        [(16, 12), (8, 6), (4, 3)],
        [(2, 6), (1, 3), (1, 2)],
    ])
@pytest.mark.parametrize('align_corners', [False, True])
@pytest.mark.parametrize('head_rows', [1, 3, 64])
def test_bands_equal_the_whole_head(shapes, align_corners, head_rows):
    head = uper_head(align_corners)
    levels = pyramid(shapes, head.in_channels)
    with torch.no_grad():
        whole = head(levels)
        bands = UPerHeadBands(head, shapes, lambda level, s: levels[level][:, :, s[0]:s[1]])
        bands.pool(head_rows)
        for span in row_bands(shapes[0][0], head_rows):
            torch.testing.assert_close(
                bands.logits(span), whole[:, :, span[0]:span[1]], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('window', [(4, 4), (3, 5), (1, 1), (30, 2)])
@pytest.mark.parametrize('head_rows', [1, 3, 64])
def test_bands_with_a_context_window_equal_the_whole_head(window, head_rows):
    """Each band pools the windows of its own top rows (read with them): the same logits as
    the head over the whole pyramid, with no call to pool()."""
    shapes = [(28, 20), (14, 10), (7, 5)]
    head = uper_head(head_type=ContextWindowUPerHead, context_window=window)
    levels = pyramid(shapes, head.in_channels)
    with torch.no_grad():
        whole = head(levels)
        bands = UPerHeadBands(head, shapes, lambda level, s: levels[level][:, :, s[0]:s[1]],
                              head.context_window)
        out = torch.cat([bands.logits(span) for span in row_bands(28, head_rows)], 2)
    torch.testing.assert_close(out, whole, rtol=1e-10, atol=1e-10)
    head.context_window = None
    with torch.no_grad():
        if window[0] < 7 or window[1] < 5:  # a window smaller than the top map changes it
            assert (head(levels) - whole).abs().max() > 1e-4


def test_windowed_band_memory_counts_the_windows_rows():
    head = uper_head()
    shapes = [(400, 10), (200, 5), (100, 3)]
    whole = UPerHeadBands(head, shapes, None).band_elements((0, 8))
    window = UPerHeadBands(head, shapes, None, (8, 8))
    assert window.plan((0, 8))['window'][0] == (0, 9)  # psp rows 0-4, their windows 0-9
    assert window.band_elements((0, 8)) > whole


def test_four_levels_and_a_head_reading_some_levels():
    """UperNet's four levels (strides 4 to 32); in_index picks the levels of a longer tuple."""
    head = uper_head(in_channels=(4, 8, 16, 16))
    shapes = [(20, 12), (10, 6), (5, 3), (3, 2)]
    levels = pyramid(shapes, head.in_channels)
    with torch.no_grad():
        whole = head(levels)
        bands = UPerHeadBands(head, shapes, lambda level, s: levels[level][:, :, s[0]:s[1]])
        bands.pool(2)
        out = torch.cat([bands.logits(span) for span in row_bands(20, 6)], 2)
    torch.testing.assert_close(out, whole, rtol=1e-10, atol=1e-10)
    assert whole.abs().max() > 0.1


def test_memory_model_counts_a_band_not_the_map():
    head = uper_head()
    small = UPerHeadBands(head, [(400, 10), (200, 5), (100, 3)], None).band_elements((0, 8))
    tall = UPerHeadBands(head, [(4000, 10), (2000, 5), (1000, 3)], None).band_elements((0, 8))
    assert small == tall > 8 * 10 * head.channels * 3


def test_other_heads_and_order_errors():
    fcn = FCNHead(in_channels=8, channels=8, num_classes=3)
    with pytest.raises(TypeError, match='UPerHead only, got FCNHead'):
        UPerHeadBands(fcn, [(4, 4)], None)
    bands = UPerHeadBands(uper_head(), [(4, 4), (2, 2), (1, 1)], None)
    with pytest.raises(RuntimeError, match=r'call pool\(\) first'):
        bands.logits((0, 2))
