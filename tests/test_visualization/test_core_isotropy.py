import pytest
import torch

from mmlinear.visualization import core_isotropy


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
