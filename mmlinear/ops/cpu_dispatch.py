"""Which library runs an op at inference on the CPU: the one place where mmlinear chooses.

The same linear layer can run through PyTorch's own composition (``F.linear``, which calls
the BLAS library PyTorch is built with, MKL in the official wheels, then a separate
activation) or through oneDNN's matmul with the bias and activation fused in its epilogue
(``torch.ops.mkldnn._linear_pointwise``, what PyTorch's compiler uses for frozen CPU
graphs). Which is faster depends on the CPU, not on its vendor alone: on an AMD EPYC MKL's
float32 GEMM ran at half oneDNN's speed, on an Intel Xeon with AMX the two were within 5 %
in float32 while a fused GELU saved a whole pass over the hidden activations
(docs/benchmarks.md). So nothing is assumed: the first inference call of each kind of op
(op, dtype, widths) times every candidate on a fixed-size input, in alternation, and keeps
the fastest (median of the rounds) for the rest of the process. The environment variable
``MMLINEAR_CPU_BACKEND`` overrides the measurement for reproducible runs ('pytorch' or
'onednn'; 'auto', the default, measures).

Only inference is dispatched: where a gradient is needed, under compilation, export or a
dispatch mode (``FlopCounterMode``), in float64 or on another device, the op runs its
PyTorch composition, which is its reference.
"""
import os
import statistics
import threading
from typing import Callable, Dict, Hashable, Mapping, Optional, Sequence

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from mmlinear.utils.ext_loader import exporting
from mmlinear.utils.precision import autocast_dtype
from mmlinear.utils.timing import interleaved_ms

#: The environment variable that overrides the measured choice.
BACKEND_VARIABLE = 'MMLINEAR_CPU_BACKEND'
#: Its values: measure at first use, or always one library.
BACKEND_CHOICES = ('auto', 'pytorch', 'onednn')
#: The dtypes the CPU dispatch serves (oneDNN's matmul takes both).
DISPATCH_DTYPES = (torch.float32, torch.bfloat16)
#: Rounds of the first-use measurement (one untimed round first); the median round counts
#: (with 3 rounds and their minimum, backends 15 % apart were ranked either way).
MEASURE_ROUNDS = 5

_choices: Dict[Hashable, str] = {}
_lock = threading.Lock()


def requested_backend() -> str:
    """The value of ``MMLINEAR_CPU_BACKEND`` ('auto' when unset).

    Raises:
        ValueError: For a value outside :data:`BACKEND_CHOICES`.
    """
    value = os.environ.get(BACKEND_VARIABLE, 'auto').strip().lower() or 'auto'
    if value not in BACKEND_CHOICES:
        raise ValueError(f'{BACKEND_VARIABLE}={os.environ[BACKEND_VARIABLE]!r} is not one of '
                         f'{BACKEND_CHOICES}')
    return value


def onednn_available(dtype: Optional[torch.dtype] = None) -> bool:
    """Whether this PyTorch has oneDNN enabled with its fused linear op, and, given a dtype,
    whether oneDNN computes in it on this CPU.

    oneDNN's bfloat16 kernels need AVX-512 (an AMD EPYC with AVX2 only has none and refuses
    to create the primitive), so the CPU's capability, as PyTorch reports it, decides rather
    than the vendor.

    Args:
        dtype (torch.dtype, optional): One of :data:`DISPATCH_DTYPES`; None asks for the op
            alone.

    Returns:
        bool: True when oneDNN can run the fused linear op (in ``dtype``).
    """
    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
            and hasattr(torch.ops.mkldnn, '_linear_pointwise')):
        return False
    if dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return True


def inference_dtype(x: Tensor, *params: Optional[Tensor]) -> Optional[torch.dtype]:
    """The dtype a dispatched CPU op computes in, or None where it must not dispatch.

    It dispatches for CPU tensors of one of :data:`DISPATCH_DTYPES` (under CPU autocast,
    float32 inputs computed in autocast's dtype), with no gradient needed, in eager
    execution: not compiled, not exported, no dispatch mode (such as ``FlopCounterMode``)
    watching.

    Args:
        x (Tensor): The input.
        *params (Tensor, optional): The op's other tensors (None is skipped).

    Returns:
        torch.dtype | None: The compute dtype, or None for the PyTorch reference.
    """
    tensors = [x] + [t for t in params if t is not None]
    if any(t.device.type != 'cpu' for t in tensors):
        return None
    dtypes = {t.dtype for t in tensors}
    dtype = autocast_dtype('cpu')
    if dtype is not None:
        if not dtypes <= {torch.float32, dtype}:
            return None
    elif len(dtypes) > 1:
        return None  # the reference raises PyTorch's own error for mixed dtypes
    else:
        dtype = dtypes.pop()
    if dtype not in DISPATCH_DTYPES:
        return None
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return None
    if torch.compiler.is_compiling() or exporting() or _get_current_dispatch_mode() is not None:
        return None
    return dtype


def choose(key: Hashable, names: Sequence[str],
           make_candidates: Callable[[], Mapping[str, Callable[[], object]]]) -> str:
    """The backend of one kind of op, measured at its first use and kept.

    Args:
        key (Hashable): What the choice is for (op name, dtype, widths); one measurement per
            key and process.
        names (Sequence[str]): The backends, 'pytorch' (the reference) among them.
        make_candidates (Callable): Builds, only when a measurement is due, backend name ->
            a call of the op on a representative input.

    Returns:
        str: The chosen backend name.
    """
    requested = requested_backend()
    if requested != 'auto':
        return requested if requested in names else 'pytorch'
    with _lock:
        if key not in _choices:
            candidates = make_candidates()
            with torch.inference_mode(), torch.autocast('cpu', enabled=False):
                rounds = interleaved_ms([candidates[n] for n in names], 1, MEASURE_ROUNDS)
            _choices[key] = min(zip(names, rounds), key=lambda item: statistics.median(item[1]))[0]
        return _choices[key]


def cpu_choices() -> Dict[Hashable, str]:
    """The choices measured so far in this process (key -> backend), for reports."""
    with _lock:
        return dict(_choices)


def forget_choices() -> None:
    """Drop the measured choices, so that the next call of each op measures again."""
    with _lock:
        _choices.clear()
