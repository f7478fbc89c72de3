"""InfViT's context_window: the streamed forward (bands updated in place, the windows' rows kept
above each band) equals the whole one; a window that covers the grid is the model without one,
bit for bit; padding a batch further leaves an image's features as they are; the memory model
counts the rows the windows reach."""
import pytest
import torch

from mmlinear.models.backbones import InfViT
from mmlinear.models.utils import pixel_padding_mask


def infvit(**kwargs):
    """Two blocks on a 10 x 8 grid (77 x 61 pixels, patch 8), every parameter off its initial
    value, float64."""
    kwargs = dict(
        dict(arch='test', img_size=48, patch_size=8, out_type='featmap', out_indices=(0, 1)),
        **kwargs)
    torch.manual_seed(0)
    model = InfViT(**kwargs)
    model.init_weights()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model.double().eval()


def image(shape=(2, 3, 77, 61)):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


@pytest.mark.parametrize('window', [(3, 3), (4, 2), (1, 5)])
@pytest.mark.parametrize('band_rows', [1, 2, 3, 100])
@pytest.mark.parametrize('masked', [False, True])
def test_streamed_equals_whole_with_a_window(window, band_rows, masked):
    """Bands of one row (each needing rows kept from the bands above), heights that do not
    divide the 10 rows, one band; a padding mask whose valid region (6 x 4 tokens) is smaller
    than some windows' sides."""
    model = infvit(context_window=window)
    x = image()
    mask = pixel_padding_mask([(77, 61), (45, 30)], (77, 61)) if masked else None
    with torch.no_grad():
        whole = model(x, mask)
    streamed = model.forward_streamed(x, mask, band_rows=band_rows)
    for got, want in zip(streamed, whole):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_the_window_changes_the_features():
    model = infvit(context_window=3)
    x = image()
    with torch.no_grad():
        windowed = model(x)[-1]
        model.context_window = None
        whole = model(x)[-1]
    assert (windowed - whole).abs().max() > 1e-3


@pytest.mark.parametrize('window', ['whole', (10, 8), 16])
def test_window_covering_the_grid_is_the_model_without_one(window):
    """Training crops: a window of the crop's grid (or larger) changes nothing, bit for bit,
    in the whole and the streamed forward."""
    x = image()
    mask = pixel_padding_mask([(77, 61), (45, 30)], (77, 61))
    with torch.no_grad():
        expected = infvit()(x, mask)
        got = infvit(context_window=window)(x, mask)
    streamed = infvit(context_window=window).forward_streamed(x, mask, band_rows=3)
    assert all(torch.equal(a, b) for a, b in zip(got, expected))
    assert all(
        torch.equal(a, b) for a, b in zip(streamed,
                                          infvit().forward_streamed(x, mask, band_rows=3)))


def test_padding_a_batch_further_leaves_the_windows_as_they_are():
    """The windows lie in each image's valid region, so an image padded into a larger batch
    keeps its features."""
    model = infvit(context_window=(3, 4))
    x = image((1, 3, 45, 30))
    padded = torch.zeros(1, 3, 77, 61, dtype=torch.float64)
    padded[:, :, :45, :30] = x
    mask = pixel_padding_mask([(45, 30)], (77, 61))
    with torch.no_grad():
        alone = model(x)[-1]
        inside = model(padded, mask)[-1][:, :, :6, :4]
    torch.testing.assert_close(inside, alone, rtol=1e-10, atol=1e-12)


def test_memory_model_counts_the_rows_the_windows_reach():
    shape = (1, 3, 8 * 64, 8 * 64)
    plain = infvit().predict_streamed_memory(shape, band_rows=8)
    windowed = infvit(context_window=16).predict_streamed_memory(shape, band_rows=8)
    # Bands of 8 rows hold up to 2 x 15 rows more, each token with the windowed workspace.
    assert windowed.band_bytes > 4 * plain.band_bytes
    assert windowed.stream_bytes == plain.stream_bytes
