"""Optional loading of the compiled ops extension ``mmlinear._ext``.

Unlike mmcv's loader, a missing extension is not an error: ``import mmlinear`` must work from a
plain source checkout or a ``MMLINEAR_WITH_OPS=0`` build, and every op has a PyTorch reference
to fall back to. The fallback is announced once per process, because it is much slower (and
Pure InfSA's reference needs N^2 memory).
"""
import importlib
import os
import warnings
from functools import lru_cache
from types import ModuleType
from typing import Optional

import torch
from torch import Tensor
from torch._subclasses.fake_tensor import is_fake

# Runtime switch: ``MMLINEAR_DISABLE_EXT=1`` ignores a built extension (``MMLINEAR_WITH_OPS``
# only acts at build time), e.g. to compare the two paths in one environment.
DISABLE_ENV = 'MMLINEAR_DISABLE_EXT'
# Every function the Python ops call; a stale build that lacks one is treated as missing.
EXT_FUNCTIONS = ('with_cuda', 'linear_infsa_forward', 'linear_infsa_backward', 'pure_infsa_forward',
                 'pure_infsa_backward', 'dynamic_dwconv2d_forward', 'dynamic_dwconv2d_backward')


@lru_cache(maxsize=None)
def load_ext() -> Optional[ModuleType]:
    """Import ``mmlinear._ext`` once.

    Returns:
        ModuleType | None: The extension, or None when it is disabled by ``MMLINEAR_DISABLE_EXT=1``
        (silently) or cannot be used (with a one-time warning saying why).
    """
    if os.getenv(DISABLE_ENV, '0') == '1':
        return None
    try:
        module = importlib.import_module('mmlinear._ext')
    except ImportError as error:
        reason = f'it cannot be imported ({error})'
    else:
        missing = [name for name in EXT_FUNCTIONS if not hasattr(module, name)]
        if not missing:
            return module
        reason = f'it is stale (no {", ".join(missing)})'
    warnings.warn(
        f'mmlinear._ext is not used because {reason}; mmlinear.ops falls back to the PyTorch '
        'references, which are slower and need N^2 memory for pure_infsa. Build it with '
        '`python setup.py build_ext --inplace` or `pip install --no-build-isolation -e .`.',
        stacklevel=2)
    return None


def kernel_ext(device: torch.device) -> Optional[ModuleType]:
    """The extension if it has kernels for ``device``, else None (use the reference).

    Args:
        device (torch.device): Device of the op's inputs.

    Returns:
        ModuleType | None: ``mmlinear._ext`` or None.
    """
    ext = load_ext()
    if ext is None:
        return None
    if device.type == 'cpu' or (device.type == 'cuda' and ext.with_cuda()):
        return ext
    return None


def runs_kernel(x: Tensor) -> bool:
    """Whether an op on ``x`` runs the compiled kernel rather than the reference.

    The kernels need real data: a fake tensor (FLOP counting with ``FakeTensorMode``,
    ``torch.compile`` tracing) goes through the reference, whose PyTorch ops those modes
    understand.

    Args:
        x (Tensor): The op's first input.

    Returns:
        bool: True if ``mmlinear._ext`` has kernels for ``x.device`` and ``x`` is not fake.
    """
    return kernel_ext(x.device) is not None and not is_fake(x)


def kernel_dtype(x: Tensor) -> torch.dtype:
    """The dtype a compiled kernel runs in for inputs like ``x``.

    The CUDA kernels take every floating type (accumulating in float32 at least); the CPU
    kernels take float32 and float64, so half types are promoted to float32 on the CPU, as
    the references compute in float32 anyway.
    """
    if x.device.type == 'cpu' and x.dtype not in (torch.float32, torch.float64):
        return torch.float32
    return x.dtype
