"""Optional loading of the compiled ops extension ``mmlinear._ext``.

Unlike mmcv's loader, a missing extension is not an error: ``import mmlinear`` must work from a
plain source checkout or a ``MMLINEAR_WITH_OPS=0`` build, and every op has a PyTorch reference
to fall back to. The fallback is announced once per process, because it is much slower (and
Pure InfSA's reference needs N^2 memory).

The ops decide between kernel and reference with :func:`has_kernel` and :func:`exporting`,
both of which ``torch.compile`` evaluates once while tracing (docs/ops.md, "torch.compile").
"""
import importlib
import os
import warnings
from collections import Counter
from functools import lru_cache
from types import ModuleType
from typing import Callable, Optional

import torch
from torch import Tensor

# Runtime switch: ``MMLINEAR_DISABLE_EXT=1`` ignores a built extension (``MMLINEAR_WITH_OPS``
# only acts at build time), e.g. to compare the two paths in one environment.
DISABLE_ENV = 'MMLINEAR_DISABLE_EXT'
# Every function the Python ops call; a stale build that lacks one is treated as missing.
EXT_FUNCTIONS = ('with_cuda', 'linear_infsa_query_sums_forward', 'linear_infsa_query_sums_backward',
                 'linear_infsa_key_pool_forward', 'linear_infsa_key_pool_backward',
                 'pure_infsa_forward', 'pure_infsa_backward', 'dynamic_dwconv2d_forward',
                 'dynamic_dwconv2d_backward')
# How many times each ``torch.ops.mmlinear`` operator has run its kernel in this process: the
# evidence that a compiled graph (whose code calls the operators) runs the kernels.
KERNEL_CALLS: Counter = Counter()


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


def require_kernel_ext(op: str, device: torch.device) -> ModuleType:
    """The extension for an operator ``torch.ops.mmlinear.<op>`` called on ``device``, counted
    in ``KERNEL_CALLS``.

    Args:
        op (str): The operator's name, for the error message.
        device (torch.device): Device of the operator's inputs.

    Returns:
        ModuleType: ``mmlinear._ext``.

    Raises:
        RuntimeError: If it has no kernels for ``device`` (not built with them, disabled or
            unusable); the functions of ``mmlinear.ops`` fall back to the references there.
    """
    ext = kernel_ext(device)
    if ext is None:
        raise RuntimeError(
            f'torch.ops.mmlinear.{op} has no kernel for {device.type} tensors: mmlinear._ext is '
            f'not built with {device.type} kernels, disabled by {DISABLE_ENV}=1 or unusable. '
            f'The functions of mmlinear.ops run the PyTorch references there.')
    KERNEL_CALLS[op] += 1
    return ext


def kernel_op(name: str, schema: str) -> Callable[[Callable], torch.library.CustomOpDef]:
    """A decorator that makes a function the operator ``torch.ops.mmlinear.<name>``: a kernel
    of ``mmlinear._ext`` for CPU and CUDA tensors that mutates none of its inputs.

    Args:
        name (str): The operator's name in the ``mmlinear`` namespace.
        schema (str): Its schema, e.g. ``'(Tensor x, Tensor? bias) -> Tensor'``.

    Returns:
        callable: ``torch.library.custom_op`` for that operator.
    """
    return torch.library.custom_op(
        f'mmlinear::{name}', mutates_args=(), device_types=('cpu', 'cuda'), schema=schema)


@torch.compiler.assume_constant_result
def has_kernel(device_type: str) -> bool:
    """Whether ``mmlinear._ext`` has kernels for devices of type ``device_type``.

    ``torch.compile`` calls this once while tracing and bakes the answer into the graph
    (loading the extension cannot be traced), so a graph compiled before
    ``MMLINEAR_DISABLE_EXT`` changes keeps the path it was compiled with.

    Args:
        device_type (str): ``torch.device.type`` of the op's inputs, e.g. 'cpu'.

    Returns:
        bool: True if the op runs the compiled kernel, False if it runs the reference.
    """
    return kernel_ext(torch.device(device_type)) is not None


def exporting() -> bool:
    """Whether a graph is being exported (``torch.onnx.export``, either exporter, or
    ``torch.export``).

    While exporting, the functions of ``mmlinear.ops`` (Linear-InfSA's sums, ``pure_infsa``,
    ``dynamic_dwconv2d``) run their PyTorch references, so that exported graphs hold standard
    operators only.

    Returns:
        bool: True inside an export.
    """
    if torch.compiler.is_exporting():
        return True
    # The TorchScript exporter runs the model eagerly; under torch.compile it cannot be active.
    return not torch.compiler.is_compiling() and torch.onnx.is_in_onnx_export()


def runs_kernel(device_type: str) -> bool:
    """Whether an op of ``mmlinear.ops`` on ``device_type`` inputs runs its compiled kernel
    (``torch.ops.mmlinear.*``) rather than its PyTorch reference: a kernel exists for the
    device and no graph is being exported.

    Args:
        device_type (str): ``torch.device.type`` of the op's inputs, e.g. 'cpu'.

    Returns:
        bool: True for the kernel, False for the reference.
    """
    return not exporting() and has_kernel(device_type)


def kernel_dtype(*tensors: Tensor) -> torch.dtype:
    """The dtype a compiled kernel runs in for inputs like ``tensors`` (their promoted dtype).

    The CUDA kernels take every floating type (accumulating in float32 at least); the CPU
    InfSA kernels take float32 and float64, so half types are promoted to float32 on the CPU,
    as the references compute in float32 anyway (the CPU depthwise-convolution kernel reads
    half types itself and does not use this).
    """
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    if tensors[0].device.type == 'cpu' and dtype not in (torch.float32, torch.float64):
        return torch.float32
    return dtype
