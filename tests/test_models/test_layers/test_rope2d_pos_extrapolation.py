"""The position policies of VECA's patch coordinates (``pos_extrapolation``): each is its
formula, all agree at the training grid, and a band's coordinates and angles are the grid's
rows bit for bit, with per-image valid extents and the training-time augmentation."""
import pytest
import torch

from mmlinear.models.layers import (ROPE_POS_EXTRAPOLATIONS, PatchRope, Rope2D, patch_band_coords,
                                    patch_grid_coords)
from mmlinear.models.streaming import band_tokens

TRAIN_SHAPE = (3, 4)  # (Ht, Wt)


def reference_axis(n, valid, period, policy):
    """The coordinates of patches 0 .. n-1 along one axis with ``valid`` valid patches,
    written out one by one."""
    values = []
    for i in range(n):
        if policy == 'interpolate':
            values.append((i + 0.5) / valid * 2 - 1)
        elif policy == 'tile':
            values.append((i % period + 0.5) / period * 2 - 1)
        else:  # 'extend': the training step, the training frame's centre on the image's
            values.append((i + 0.5 - valid / 2) / period * 2)
    return torch.tensor(values, dtype=torch.float64)


def reference_grid(hw_shape, valid_hw, policy):
    """(B, Hp * Wp, 2) (x, y) in float64, row-major."""
    Hp, Wp = hw_shape
    grids = []
    for h, w in valid_hw:
        x = reference_axis(Wp, w, TRAIN_SHAPE[1], policy)
        y = reference_axis(Hp, h, TRAIN_SHAPE[0], policy)
        grids.append(torch.stack([x[None].expand(Hp, Wp), y[:, None].expand(Hp, Wp)], -1))
    return torch.stack(grids).reshape(len(valid_hw), Hp * Wp, 2)


@pytest.mark.parametrize('policy', ROPE_POS_EXTRAPOLATIONS)
@pytest.mark.parametrize('hw_shape,valid_hw', [
    ((3, 4), [[3, 4]]),
    ((11, 9), [[11, 9], [7, 5], [2, 3]]),
    ((2, 2), [[2, 2], [1, 2]]),
])
def test_each_policy_is_its_formula(policy, hw_shape, valid_hw):
    """Larger than the training grid (not a multiple of its period), padded images of
    another size and a grid smaller than the training one."""
    coords = patch_grid_coords(hw_shape, torch.tensor(valid_hw), None, policy, TRAIN_SHAPE)
    expected = reference_grid(hw_shape, valid_hw, policy)
    assert coords.dtype == torch.float32
    torch.testing.assert_close(coords.double(), expected, rtol=0, atol=1e-6)


def test_interpolate_is_the_normalised_grid_bit_for_bit():
    """The default: the coordinates of the reference, whether or not a training grid is
    given."""
    Hp, Wp = 11, 9
    valid_hw = torch.tensor([[11, 9], [7, 5]])
    sizes = valid_hw.float()
    x = (torch.arange(Wp, dtype=torch.float32) + 0.5)[None] / sizes[:, 1:] * 2.0 - 1.0
    y = (torch.arange(Hp, dtype=torch.float32) + 0.5)[None] / sizes[:, :1] * 2.0 - 1.0
    expected = torch.stack([x[:, None].expand(2, Hp, Wp), y[:, :, None].expand(2, Hp, Wp)], -1)
    expected = expected.reshape(2, Hp * Wp, 2)
    assert torch.equal(patch_grid_coords((Hp, Wp), valid_hw), expected)
    assert torch.equal(
        patch_grid_coords((Hp, Wp), valid_hw, None, 'interpolate', TRAIN_SHAPE), expected)


def test_every_tile_sees_the_training_coordinates():
    coords = patch_grid_coords((9, 8), None, None, 'tile', TRAIN_SHAPE)[0].view(9, 8, 2)
    train = patch_grid_coords(TRAIN_SHAPE)[0].view(*TRAIN_SHAPE, 2)
    for r0 in range(0, 9, 3):
        for c0 in range(0, 8, 4):
            assert torch.equal(coords[r0:r0 + 3, c0:c0 + 4], train)


def test_extend_keeps_the_training_step_centred_on_the_image():
    coords = patch_grid_coords((9, 8), None, None, 'extend', TRAIN_SHAPE)[0].view(9, 8, 2)
    torch.testing.assert_close(
        coords[:, 1:, 0] - coords[:, :-1, 0], torch.full((9, 7), 2 / 4), rtol=0, atol=1e-6)
    torch.testing.assert_close(
        coords[1:, :, 1] - coords[:-1, :, 1], torch.full((8, 8), 2 / 3), rtol=0, atol=1e-6)
    torch.testing.assert_close(coords.mean((0, 1)), torch.zeros(2), rtol=0, atol=1e-6)


@pytest.mark.parametrize('with_extents', [False, True])
def test_all_policies_agree_at_the_training_grid_bit_for_bit(with_extents):
    """Also for a padded batch whose images have the training grid as their valid region
    (its padded patches differ: tiling wraps them)."""
    hw_shape = (5, 6) if with_extents else TRAIN_SHAPE
    valid_hw = torch.tensor([[3, 4], [3, 4]]) if with_extents else None
    Ht, Wt = TRAIN_SHAPE
    coords = []
    for policy in ROPE_POS_EXTRAPOLATIONS:
        grid = patch_grid_coords(hw_shape, valid_hw, None, policy, TRAIN_SHAPE)
        coords.append(grid.unflatten(1, hw_shape)[:, :Ht, :Wt])
    for other in coords[1:]:
        assert torch.equal(other, coords[0])


@pytest.mark.parametrize('policy', ROPE_POS_EXTRAPOLATIONS)
@pytest.mark.parametrize('with_extents', [False, True])
def test_every_band_is_the_slice_of_the_whole_grid_for_each_policy(policy, with_extents):
    hw_shape = (7, 9)
    valid_hw = torch.tensor([[7, 9], [5, 6], [2, 2]]) if with_extents else None
    whole = patch_grid_coords(hw_shape, valid_hw, None, policy, TRAIN_SHAPE)
    for r0 in range(hw_shape[0]):
        for r1 in range(r0 + 1, hw_shape[0] + 1):
            band = patch_band_coords(hw_shape, (r0, r1), valid_hw, None, policy, TRAIN_SHAPE)
            assert torch.equal(band, whole[:, band_tokens(hw_shape, (r0, r1))])


@pytest.mark.parametrize('policy', ROPE_POS_EXTRAPOLATIONS)
@pytest.mark.parametrize('training', [False, True])
def test_patch_rope_band_rows_are_the_grid_rows_for_each_policy(policy, training):
    """Bit for bit, in eval mode and with the training-time augmentation (drawn once)."""
    rope = Rope2D(32).train(training)
    valid_hw = torch.tensor([[7, 9], [5, 6]])
    torch.manual_seed(0)
    patch_rope = PatchRope(rope, (7, 9), valid_hw, 2, None, policy, TRAIN_SHAPE)
    grid_cos, grid_sin = patch_rope.grid()
    for start, stop in [(0, 1), (1, 4), (4, 7), (0, 7)]:
        cos, sin = patch_rope.rows(start, stop)
        tokens = band_tokens((7, 9), (start, stop))
        assert torch.equal(cos, grid_cos[:, tokens]) and torch.equal(sin, grid_sin[:, tokens])
    expected = rope(
        rope.augment(
            patch_grid_coords((7, 9), valid_hw, None, policy, TRAIN_SHAPE),
            patch_rope.augmentation))
    assert torch.equal(grid_cos, expected[0]) and torch.equal(grid_sin, expected[1])


def test_unknown_policy_is_refused_naming_the_allowed_ones():
    message = r"unknown pos_extrapolation 'wrap'; allowed: 'interpolate', 'tile', 'extend'"
    with pytest.raises(ValueError, match=message):
        patch_grid_coords((5, 5), None, None, 'wrap', TRAIN_SHAPE)


@pytest.mark.parametrize('policy', ['tile', 'extend'])
def test_policies_of_the_training_frame_need_the_training_grid(policy):
    with pytest.raises(ValueError, match=rf"pos_extrapolation '{policy}' needs the training"):
        patch_grid_coords((5, 5), None, None, policy)
