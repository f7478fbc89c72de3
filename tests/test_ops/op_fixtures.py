"""Fixtures shared by the op tests (imported by name: a conftest.py here would shadow
tests/conftest.py, which other tests import as `conftest`): every case runs on each device."""
from typing import Callable, Set

import pytest
import torch

from mmlinear.utils.ext_loader import KERNEL_CALLS, load_ext


@pytest.fixture(params=[
    'cpu',
    pytest.param(
        'cuda',
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')),
])
def device(request) -> torch.device:
    """A device to run the op on; the kernels must agree with the references on each."""
    return torch.device(request.param)


@pytest.fixture
def ext():
    """The compiled extension; skips where it is not built (the reference path still runs
    every other test)."""
    module = load_ext()
    if module is None:
        pytest.skip('mmlinear._ext is not built or disabled')
    return module


def kernels_run(fn: Callable[[], object]) -> Set[str]:
    """The ``torch.ops.mmlinear`` operators that ran their kernels during ``fn()``, e.g.
    {'pure_infsa', 'pure_infsa_backward'}."""
    before = KERNEL_CALLS.copy()
    fn()
    return set(KERNEL_CALLS - before)
