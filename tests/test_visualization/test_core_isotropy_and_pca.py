import pytest
import torch

from mmlinear.visualization import core_isotropy, pca_rgb


def test_isotropy_is_near_one_for_random_cores_and_minimal_on_a_line():
    torch.manual_seed(0)
    random_cores = torch.randn(3, 8, 256)  # 8 cores in a wide space: nearly isotropic
    assert bool((core_isotropy(random_cores) > 0.9).all())
    direction = torch.randn(256)
    line = torch.arange(8.)[:, None] * direction  # every core on one line
    assert float(core_isotropy(line)) == pytest.approx(1 / 7, rel=1e-4)  # rank 1 of 7
    # Shifting every core alike changes nothing (the spread is measured around the mean).
    torch.testing.assert_close(core_isotropy(random_cores + 5), core_isotropy(random_cores))
    with pytest.raises(ValueError, match='at least 2 cores, got 1'):
        core_isotropy(torch.randn(1, 16))


def test_pca_colours_follow_the_main_directions():
    torch.manual_seed(0)
    features = torch.randn(2, 16, 6, 6) * 0.01
    features[:, 3] += torch.linspace(-5, 5, 6)  # the dominant variation runs along W
    colours = pca_rgb(features, quantile=0.0)
    assert colours.shape == (2, 3, 6, 6)
    assert float(colours.min()) == 0. and float(colours.max()) == 1.
    first = colours[:, 0]
    # The first component orders the columns (up to its arbitrary sign).
    profile = first.mean(dim=(0, 1))
    assert bool((profile.diff() > 0).all() or (profile.diff() < 0).all())
    with pytest.raises(ValueError, match='at least 3 channels, got 2'):
        pca_rgb(torch.randn(1, 2, 4, 4))
