"""Token streams: bands of grid rows, buffers in memory or mapped from disk, image rows."""
import os

import numpy as np
import pytest
import torch

from mmlinear.models.streaming.band_progress import BandProgress
from mmlinear.models.streaming.image_rows import ImageRows
from mmlinear.models.streaming.memory_model import tallest_fitting
from mmlinear.models.streaming.token_stream import TokenStream, allocate_buffer, row_bands
from mmlinear.models.utils import pixel_padding_mask, pixel_to_token_mask


@pytest.mark.parametrize('num_rows, band_rows, align, expected', [
    (10, 3, 1, [(0, 3), (3, 6), (6, 9), (9, 10)]),
    (10, 100, 1, [(0, 10)]),
    (5, 1, 1, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]),
    (7, 3, 2, [(0, 2), (2, 4), (4, 6), (6, 7)]),
    (7, 1, 2, [(0, 2), (2, 4), (4, 6), (6, 7)]),
    (7, 5, 2, [(0, 4), (4, 7)]),
])
def test_row_bands_cover_every_row_once_on_aligned_starts(num_rows, band_rows, align, expected):
    assert row_bands(num_rows, band_rows, align) == expected


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.bfloat16])
def test_disk_buffer_is_an_anonymous_mapped_file(tmp_path, dtype):
    buffer = allocate_buffer((2, 5, 3), dtype, 'disk', str(tmp_path))
    assert buffer.shape == (2, 5, 3) and buffer.dtype == dtype
    values = torch.arange(30, dtype=torch.float32).reshape(2, 5, 3).to(dtype)
    buffer[:] = values
    assert torch.equal(buffer, values)
    assert os.listdir(tmp_path) == []  # created unlinked: nothing to remove, even on a crash
    mapped = open('/proc/self/maps').read()
    assert '(deleted)' in mapped


def test_stream_reads_and_writes_bands_of_rows():
    mask = torch.zeros(1, 12, dtype=torch.bool)
    mask[0, 9:] = True
    stream = TokenStream(1, (4, 3), 2, torch.float32, torch.device('cpu'), mask, band_rows=3)
    assert stream.bands == [(0, 3), (3, 4)]
    tokens = torch.arange(24, dtype=torch.float32).reshape(1, 12, 2)
    for start, stop in stream.bands:
        stream.write(start, stop, tokens[:, start * 3:stop * 3])
    assert torch.equal(stream.read(1, 3), tokens[:, 3:9])
    assert torch.equal(stream.mask(3, 4), mask[:, 9:])
    stream.extra = torch.ones(1, 1, 2)
    segments = [band for band, _, _ in stream.segments()]
    assert segments == [None, (0, 3), (3, 4)] and stream.num_extra_tokens == 1
    with pytest.raises(ValueError, match=r'grid rows \[3, 5\) lie outside the 4 rows'):
        stream.read(3, 5)


def test_stream_reports_each_band_of_a_pass_after_its_work():
    reported = []
    stream = TokenStream(
        1, (5, 2),
        2,
        torch.float32,
        torch.device('cpu'),
        None,
        band_rows=2,
        on_rows=reported.append)
    for start, stop in stream.pass_bands():
        assert sum(reported) == start  # the band in hand is not counted yet
    assert reported == [2, 2, 1]
    stream.extra = torch.ones(1, 1, 2)
    for _ in stream.segments():
        pass
    assert reported == [2, 2, 1] * 2  # the extra tokens are not rows
    stream.read(0, 5)
    assert len(reported) == 6  # reads outside a pass (halo rows, outputs) are not counted


def test_image_rows_read_numpy_and_tensors_alike():
    array = np.random.default_rng(0).standard_normal((1, 3, 9, 4)).astype(np.float32)
    rows = ImageRows(array, 3).read(2, 5, torch.device('cpu'), torch.float64)
    assert rows.dtype == torch.float64
    torch.testing.assert_close(rows, torch.from_numpy(array[:, :, 2:5]).double())
    with pytest.raises(TypeError, match='floating-point'):
        ImageRows(array.astype(np.uint16), 3)
    with pytest.raises(ValueError, match=r'\(B, 4, H, W\)'):
        ImageRows(array, 4)


def test_token_mask_of_a_mask_taller_than_a_reduction_band_is_exact():
    """pixel_to_token_mask reduces 1024 pixel rows (256 patches of 4) at a time: a mask of
    3000 rows, with valid regions ending inside a band and across a band border, gives
    exactly the per-patch 'all pixels padded' of the whole mask."""
    mask = pixel_padding_mask([(3000, 20), (1025, 13)], (3000, 20))
    tokens = pixel_to_token_mask(mask, 4).view(2, 750, 5)
    expected = mask.view(2, 750, 4, 5, 4).all(dim=4).all(dim=2)
    assert torch.equal(tokens, expected)
    assert tokens[1, 256].tolist() == [False, False, False, False, True]  # row 1024 valid


def test_progress_shows_only_when_asked_or_after_a_while():
    clock = iter([0.0, 1.0, 1.0, 10.0])
    with BandProgress(30, None, clock=lambda: next(clock)) as bar:
        bar.describe('block 1/2')
        bar.advance(4)  # 1 s: still hidden
        assert bar._bar is None
        bar.advance(6)  # 10 s: shown, with the part last named
        assert bar._bar is not None and bar.done == 10
        assert bar._bar.tasks[0].completed == 10
        assert bar._bar.tasks[0].description == 'block 1/2'
    with BandProgress(2, False, clock=lambda: 100.0) as bar:
        bar.describe('a')
        bar.advance()
        assert bar._bar is None and bar.done == 1
    with BandProgress(2, True, clock=lambda: 0.0) as bar:
        assert bar._bar is not None


@pytest.mark.parametrize('lowest, highest', [(1, 1), (1, 2), (2, 9), (1, 64), (3, 2)])
def test_the_tallest_fitting_band_is_the_last_of_the_heights_that_fit(lowest, highest):
    """The one band search (backbones, segmentation, detection) against a scan of every
    height, for every threshold between the lowest and the highest."""
    for threshold in range(lowest, max(highest, lowest) + 1):
        asked = []

        def fits(rows):
            asked.append(rows)
            return rows <= threshold

        scan = max(h for h in range(lowest, max(highest, lowest) + 1) if h <= threshold)
        assert tallest_fitting(lowest, highest, fits) == scan
        assert all(lowest <= rows <= max(highest, lowest) for rows in asked)
