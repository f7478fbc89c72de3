import numpy as np
import pytest
import torch

from mmlinear.visualization import core_partition, half_mass_area


def plain_half_mass_area(row, mass=0.5):
    """The definition, written out: patches from the most attended down until they hold
    ``mass`` of the row's total."""
    weights = sorted((float(w) for w in row), reverse=True)
    total, held = sum(weights), 0.0
    for count, weight in enumerate(weights, start=1):
        held += weight
        if held >= mass * total - 1e-9:
            return count
    raise AssertionError('never reached')


def test_half_mass_area_matches_the_plain_count_on_a_hand_made_map():
    # 3 cores over 8 patches (weights need not sum to 1: only each row's shares count).
    attention = torch.tensor([
        [0.0, 0.0, 6.0, 1.0, 1.0, 1.0, 1.0, 0.0],  # one peak holds 6 / 10: area 1
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],  # even over 8: half is 4 patches
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],  # 0.8 + 0.7 + 0.6 = 2.1 of 3.6 > 1.8: 3
    ])
    expected = [plain_half_mass_area(row) for row in attention]
    assert expected == [1, 4, 3]
    assert half_mass_area(attention).tolist() == expected
    # Another mass, and the leading axes (blocks, images) kept.
    assert half_mass_area(
        attention, mass=0.9).tolist() == [plain_half_mass_area(row, 0.9) for row in attention]
    torch.manual_seed(0)
    random = torch.rand(2, 3, 5, 64)
    area = half_mass_area(random)
    assert area.shape == (2, 3, 5)
    assert area.flatten().tolist() == [plain_half_mass_area(row) for row in random.reshape(-1, 64)]


def test_a_core_spread_over_a_larger_region_has_a_larger_area():
    small = torch.zeros(1, 64)
    small[0, :4] = 1
    large = torch.zeros(1, 64)
    large[0, :32] = 1
    assert float(half_mass_area(small)) == 2 and float(half_mass_area(large)) == 16


def test_each_patch_goes_to_the_core_for_which_it_weighs_most():
    attention = torch.tensor([
        [5.0, 5.0, 0.0, 0.0],  # a core on patches 0-1
        [1.0, 1.0, 4.0, 4.0],  # a broad core: 0.4 of it on each of patches 2, 3
    ])
    assert core_partition(attention).tolist() == [0, 0, 1, 1]
    # Per-core shares, not raw weights: the broad core wins patch 3 although core 0's raw
    # weight there is larger.
    shares = torch.tensor([[90.0, 10.0, 0.0], [0.0, 1.0, 1.0]])
    assert core_partition(shares).tolist() == [0, 1, 1]
    np.testing.assert_array_equal(core_partition(torch.rand(2, 8, 16)).shape, (2, 16))


@pytest.mark.parametrize('attention,mass,message', [
    (torch.ones(4), 0.5, r'\(\.\.\., K, N\) core rows over the patches, got shape \(4,\)'),
    (-torch.ones(2, 4), 0.5, 'non-negative'),
    (torch.ones(2, 4), 0.0, r'mass must lie in \(0, 1\], got 0.0'),
])
def test_bad_input_is_refused(attention, mass, message):
    with pytest.raises(ValueError, match=message):
        half_mass_area(attention, mass)
