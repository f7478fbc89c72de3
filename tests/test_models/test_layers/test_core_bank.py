"""mmlinear.models.layers.core_bank: the budgets of an elastic-core sweep."""
import pytest

from mmlinear.models.layers import check_core_budgets


def test_budgets_must_be_chunks_of_eight():
    assert check_core_budgets([64, 8, 32, 8], 64, 8) == [8, 32, 64]
    with pytest.raises(ValueError, match=r'multiples of 8 in \[8, 64\], got \[12, 72, 0\]'):
        check_core_budgets([12, 72, 0, 16], 64, 8)
