"""Position policies for grids of another size than the table's (``pos_extrapolation``): each
equals a reference written out plainly, whole and band by band, with and without padding."""
import pytest
import torch
import torch.nn.functional as F

from mmlinear.models.utils import pos_embed_for_valid_regions
from mmlinear.models.utils.pos_embed import BandPosEmbed, pos_embed_on_grid

SRC = (4, 3)  # the table's grid (Hs, Ws): non-square, so rows and columns cannot be swapped
CHANNELS = 5


def table(dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return torch.randn(1, 1 + SRC[0] * SRC[1], CHANNELS, generator=g, dtype=dtype)


def tiled_reference(pos, dst):
    """The table repeated whole over the grid, then cropped to it: (h, w, C)."""
    grid = pos[0, 1:].reshape(*SRC, CHANNELS)
    reps = (-(-dst[0] // SRC[0]), -(-dst[1] // SRC[1]), 1)
    return grid.repeat(*reps)[:dst[0], :dst[1]]


def interpolated_reference(pos, dst):
    """Today's positions: the table stretched over the grid by one bicubic F.interpolate."""
    grid = pos[0, 1:].reshape(*SRC, CHANNELS).permute(2, 0, 1)[None]
    return F.interpolate(grid, size=dst, mode='bicubic', align_corners=False)[0].permute(1, 2, 0)


REFERENCES = dict(tile=tiled_reference, interpolate=interpolated_reference)
# Multiples of the period (8 x 6, 4 x 3), grids that are not (11 x 7, 9 x 13), and smaller
# than the table along one axis (2 x 5).
GRIDS = [(8, 6), (4, 3), (11, 7), (9, 13), (2, 5)]


@pytest.mark.parametrize('policy', ['interpolate', 'tile'])
@pytest.mark.parametrize('dst', GRIDS)
def test_each_policy_equals_its_reference(policy, dst):
    pos = table()
    got = pos_embed_on_grid(pos, SRC, dst, policy)
    assert got.shape == (1, 1 + dst[0] * dst[1], CHANNELS)
    assert torch.equal(got[:, :1], pos[:, :1])
    expected = REFERENCES[policy](pos, dst).reshape(1, -1, CHANNELS)
    torch.testing.assert_close(got[:, 1:], expected, rtol=1e-13, atol=1e-13)


def test_tiling_repeats_the_table_at_its_period_exactly():
    pos = table(torch.bfloat16)
    got = pos_embed_on_grid(pos, SRC, (11, 7), 'tile')[0, 1:].reshape(11, 7, CHANNELS)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, tiled_reference(pos, (11, 7)))
    # Every window of the table's size starting on the period sees the table itself.
    assert torch.equal(got[4:8, 3:6], pos[0, 1:].reshape(*SRC, CHANNELS))


@pytest.mark.parametrize('policy', ['interpolate', 'tile'])
@pytest.mark.parametrize('dst', GRIDS)
def test_band_rows_equal_the_whole_grid(policy, dst):
    pos = table()
    whole = pos_embed_on_grid(pos, SRC, dst, policy)[:, 1:]
    bands = BandPosEmbed(pos, SRC, dst, extrapolation=policy)
    got = torch.cat([bands.rows(s, min(s + 2, dst[0])) for s in range(0, dst[0], 2)], dim=1)
    tol = 0 if policy == 'tile' else 1e-13  # tiling's one-hot weights only copy values
    torch.testing.assert_close(got, whole, rtol=tol, atol=tol)


@pytest.mark.parametrize('policy', ['interpolate', 'tile'])
def test_padded_batch_gets_each_images_positions_and_zeros(policy):
    """Each image's valid region gets the reference positions of its own size, whole and
    band by band; padded tokens get zeros."""
    pos, canvas = table(), (11, 13)
    valid = [(11, 13), (9, 7), (3, 2)]
    whole = pos_embed_for_valid_regions(pos, SRC, valid, canvas, extrapolation=policy)
    bands = BandPosEmbed(pos, SRC, canvas, valid, extrapolation=policy)
    streamed = torch.cat([bands.rows(s, min(s + 3, 11)) for s in range(0, 11, 3)], dim=1)
    for got in (whole[:, 1:], streamed):
        got = got.reshape(len(valid), *canvas, CHANNELS)
        for image, (h, w) in enumerate(valid):
            expected = torch.zeros(*canvas, CHANNELS, dtype=pos.dtype)
            expected[:h, :w] = REFERENCES[policy](pos, (h, w))
            torch.testing.assert_close(got[image], expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize('build', [
    lambda: pos_embed_on_grid(table(), SRC, (8, 8), 'stretch'),
    lambda: BandPosEmbed(table(), SRC, (8, 8), extrapolation='stretch'),
])
def test_unknown_policy_is_refused_naming_the_allowed_ones(build):
    with pytest.raises(
            ValueError, match="unknown pos_extrapolation 'stretch'; allowed: "
            "'interpolate', 'tile'"):
        build()
