"""Peak memory of the current process on the CPU: the resident-set high-water mark above a
baseline, and a cap on the data segment so that a too large case fails cleanly.

After the model is built, :func:`reset_cpu_peak` resets the kernel's resident-set high-water
mark (``/proc/self/clear_refs``, value 5) and returns the RSS as the baseline; after the
measured work, :func:`cpu_peak` minus that baseline is the peak of the input, the activations
and every temporary, but not of the weights built before. Where ``clear_refs`` is unavailable,
``ru_maxrss`` is read instead (the method string says which).
"""
import resource
from typing import Tuple

#: The methods :func:`reset_cpu_peak` reports.
HWM_METHOD = 'VmHWM-after-reset minus RSS'
MAXRSS_METHOD = 'ru_maxrss minus RSS'


def _proc_status_kib(field: str) -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise KeyError(field)


def reset_cpu_peak() -> Tuple[int, str]:
    """Reset the RSS high-water mark if the kernel allows it.

    Returns:
        tuple[int, str]: The baseline RSS in bytes and the method (``HWM_METHOD`` or
        ``MAXRSS_METHOD``) that :func:`cpu_peak` must be given.
    """
    rss = _proc_status_kib('VmRSS') * 1024
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return _proc_status_kib('VmRSS') * 1024, HWM_METHOD
    except OSError:
        return rss, MAXRSS_METHOD


def cpu_peak(method: str) -> int:
    """The process's resident-set peak in bytes, as ``method`` reads it.

    Args:
        method (str): What :func:`reset_cpu_peak` returned.

    Returns:
        int: ``VmHWM`` (since the reset) or ``ru_maxrss`` (since the start), in bytes.
    """
    if method == HWM_METHOD:
        return _proc_status_kib('VmHWM') * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def limit_data_segment(gigabytes: float) -> None:
    """Cap this process's data segment (``RLIMIT_DATA``), so that an allocation beyond it
    fails (an out-of-memory error) instead of pushing the machine into the OOM killer.

    Args:
        gigabytes (float): The cap in GiB.
    """
    limit = int(gigabytes * 2**30)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def is_oom(error: BaseException) -> bool:
    """Whether an exception is an allocation failure (CPU or CUDA)."""
    text = str(error).lower()
    return isinstance(error, MemoryError) or 'out of memory' in text or \
        "can't allocate memory" in text or 'cannot allocate memory' in text
