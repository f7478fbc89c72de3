"""ContextWindowUPerHead: the pyramid pooling of each position over the window around it
against mmseg's PPM run on that window alone, and against UPerHead where the window holds
the map."""
import pytest
import torch
from mmengine.registry import init_default_scope
from mmseg.models.decode_heads import UPerHead

from mmlinear.models.decode_heads import ContextWindowUPerHead, context_window_uper_head
from mmlinear.models.utils.windowed_pyramid_pooling import windowed_pyramid_pooling
from mmlinear.registry import MODELS

HEAD = dict(
    in_channels=[4, 6],
    in_index=[0, 1],
    channels=5,
    num_classes=3,
    norm_cfg=dict(type='BN'),
    pool_scales=(1, 2, 3, 6))


def randomised(head):
    """``head`` in float64 eval mode, BN statistics away from 0 / 1."""
    torch.manual_seed(0)
    for module in head.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_(0, 0.5)
            module.running_var.uniform_(0.5, 2)
    return head.double().eval()


def window_head(context_window=None, align_corners=False):
    torch.manual_seed(0)
    return randomised(
        ContextWindowUPerHead(context_window=context_window, align_corners=align_corners, **HEAD))


def reference_ppm(ppm, x, p, q, window):
    """Position (p, q)'s PPM outputs written out plainly: the window of ``window`` cells
    with (p, q) at its cell ((h - 1) // 2, (w - 1) // 2), moved inside the map at the
    borders, run through mmseg's PPM alone."""
    H, W = x.shape[2:]
    h, w = min(window[0], H), min(window[1], W)
    top = min(max(p - (h - 1) // 2, 0), H - h)
    left = min(max(q - (w - 1) // 2, 0), W - w)
    outputs = ppm(x[:, :, top:top + h, left:left + w])
    return [out[:, :, p - top, q - left] for out in outputs]


@pytest.mark.parametrize('window', [(8, 8), (5, 5), (4, 7), (11, 3), (1, 1)])
@pytest.mark.parametrize('align_corners', [False, True])
def test_each_position_equals_ppm_on_its_window(window, align_corners):
    """Odd and even windows, every position of a 11 x 9 map (the borders included)."""
    head = window_head(window, align_corners)
    x = torch.randn(2, 6, 11, 9, dtype=torch.float64)
    with torch.no_grad():
        outputs = windowed_pyramid_pooling(head.psp_modules, x, 0, (0, 11), (11, 9), window,
                                           align_corners)
        for p in range(11):
            for q in range(9):
                expected = reference_ppm(head.psp_modules, x, p, q, window)
                for out, ref in zip(outputs, expected):
                    torch.testing.assert_close(out[:, :, p, q], ref, rtol=1e-10, atol=1e-10)
    assert len(outputs) == 4 and outputs[-1].shape == (2, 5, 11, 9)


def test_window_of_a_tile_gives_the_tile_alone_where_they_align():
    """A map of 3 x 2 tiles of 8 x 8: the positions whose window is a corner tile (its first
    4 rows and columns at the top left, its last 4 at the bottom right) take the PPM of that
    tile run alone."""
    head = window_head((8, 8))
    x = torch.randn(1, 6, 24, 16, dtype=torch.float64)
    with torch.no_grad():
        outputs = windowed_pyramid_pooling(head.psp_modules, x, 0, (0, 24), (24, 16), (8, 8), False)
        first, last = head.psp_modules(x[:, :, :8, :8]), head.psp_modules(x[:, :, 16:, 8:])
    for out, tile_first, tile_last in zip(outputs, first, last):
        torch.testing.assert_close(out[:, :, :4, :4], tile_first[:, :, :4, :4])
        torch.testing.assert_close(out[:, :, 20:, 12:], tile_last[:, :, 4:, 4:])


def head_beside_uperhead(window):
    """The head with ``window``, mmseg's UPerHead with its weights, and two float64 levels
    whose top one is 13 x 11."""
    head = window_head(window)
    torch.manual_seed(0)
    plain = randomised(UPerHead(**HEAD))
    plain.load_state_dict(head.state_dict())
    levels = [
        torch.randn(2, 4, 26, 22, dtype=torch.float64),
        torch.randn(2, 6, 13, 11, dtype=torch.float64)
    ]
    return head, plain, levels


@pytest.mark.parametrize('window', [None, 'whole', (13, 11), (20, 40), 64])
def test_window_holding_the_map_is_uperhead(window):
    """None or 'whole', or a window at least the map: exactly mmseg's UPerHead (the same
    weights)."""
    head, plain, levels = head_beside_uperhead(window)
    with torch.no_grad():
        assert torch.equal(head(levels), plain(levels))


@pytest.mark.parametrize('window', [(13, 11), (20, 40), (13, 64)])
@pytest.mark.parametrize('align_corners', [False, True])
def test_windows_holding_the_map_are_ppm_on_the_whole_map(window, align_corners):
    """The windowed pooling with a window at least the map's size (as an exported graph
    computes it at such sizes): mmseg's PPM on the whole map, up to rounding."""
    head = window_head(None, align_corners)
    x = torch.randn(2, 6, 13, 11, dtype=torch.float64)
    with torch.no_grad():
        outputs = windowed_pyramid_pooling(head.psp_modules, x, 0, (0, 13), (13, 11), window,
                                           align_corners)
        expected = head.psp_modules(x)
    for out, ref in zip(outputs, expected):
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


def test_while_exporting_the_head_pools_windows_that_hold_the_map_as_uperhead(monkeypatch):
    """While a graph is exported the head takes its windowed pooling at every size; where the
    window holds the map it is mmseg's UPerHead (the same weights) up to rounding."""
    head, plain, levels = head_beside_uperhead(64)
    calls = []
    monkeypatch.setattr(context_window_uper_head, 'windowed_pyramid_pooling',
                        lambda *args: calls.append(args) or windowed_pyramid_pooling(*args))
    monkeypatch.setattr(context_window_uper_head, 'exporting', lambda: True)
    with torch.no_grad():
        torch.testing.assert_close(head(levels), plain(levels), rtol=1e-10, atol=1e-10)
    assert len(calls) == 1


def test_window_changes_the_output_and_is_settable_on_a_built_head():
    head = window_head()
    levels = [
        torch.randn(1, 4, 32, 32, dtype=torch.float64),
        torch.randn(1, 6, 16, 16, dtype=torch.float64)
    ]
    with torch.no_grad():
        whole = head(levels)
        head.context_window = 8
        assert head.context_window == (8, 8)
        windowed = head(levels)
    assert (windowed - whole).abs().max() > 1e-3


def test_built_from_a_config_with_uperhead_keys():
    init_default_scope('mmseg')
    head = MODELS.build(dict(type='mmlinear.ContextWindowUPerHead', context_window=[8, 6], **HEAD))
    assert head.context_window == (8, 6)
    assert set(head.state_dict()) == set(UPerHead(**HEAD).state_dict())


@pytest.mark.parametrize('bad',
                         [0, -3, (8, 0), (8, ), (8, 8, 8), 'all', 'Whole', 2.5, True, (8, None)])
def test_bad_windows_are_refused_naming_the_allowed_values(bad):
    with pytest.raises(ValueError, match="context_window must be None or 'whole' .* positive int"):
        window_head(bad)
    head = window_head()
    with pytest.raises(ValueError, match='context_window must be None'):
        head.context_window = bad
    assert head.context_window is None


def test_band_missing_the_windows_rows_is_refused():
    head = window_head()
    x = torch.randn(1, 6, 6, 11, dtype=torch.float64)
    with pytest.raises(ValueError, match='must cover rows 7-16'):
        windowed_pyramid_pooling(head.psp_modules, x, 4, (10, 12), (20, 11), (8, 8), False)
