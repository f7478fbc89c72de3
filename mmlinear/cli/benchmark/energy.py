"""Energy of the timed runs, from the hardware's own counters (never estimated).

- CPU: Linux's powercap interface to RAPL (``/sys/class/powercap/intel-rapl:N``, which AMD
  processors expose too), the energy of each package since boot in microjoules. It counts
  everything the package did, other processes included, so a figure is only meaningful on an
  idle machine. The counters wrap at ``max_energy_range_uj`` (minutes at a few hundred watts),
  so a background thread reads them every few seconds and adds up the steps.
- CUDA: NVML's total energy of the GPU since the driver loaded, in millijoules (Volta and
  newer), read through the driver's ``libnvidia-ml.so.1``.

Where neither can be read (no powercap zone, counters readable by root only, no NVML), the
meter is absent and the reason says why: the benchmark reports "not available", never a guess.
"""
import ctypes
import glob
import os.path as osp
import re
import threading
from typing import Callable, List, Optional, Tuple

POWERCAP_ROOT = '/sys/class/powercap'
# The package zones (intel-rapl:0, intel-rapl:1); their sub-zones (intel-rapl:0:0, ...) are
# parts of them (cores, uncore, DRAM) and would count twice.
_PACKAGE_ZONE = re.compile(r'intel-rapl:\d+$')


class EnergyMeter:
    """Joules spent between :meth:`start` and :meth:`stop`, from a counter that may wrap.

    Args:
        read_counter (Callable[[], list[int]]): The raw counters (one per zone), in ``unit``
            joules.
        wrap_at (list[int], optional): Each counter's range: a reading below the previous one
            has wrapped once. None for counters that do not wrap.
        unit (float): Joules per counter step.
        source (str): What is measured, for the report.
        interval_s (float, optional): Read the counters this often between start and stop
            (so that no counter wraps twice unseen). None reads them only at both ends.
    """

    def __init__(self,
                 read_counter: Callable[[], List[int]],
                 wrap_at: Optional[List[int]],
                 unit: float,
                 source: str,
                 interval_s: Optional[float] = None) -> None:
        self.read_counter = read_counter
        self.wrap_at = wrap_at
        self.unit = unit
        self.source = source
        self.interval_s = interval_s
        self._steps = 0
        self._last: List[int] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def sample(self) -> None:
        """Read the counters now and add their steps (the polling thread calls it too)."""
        counts = self.read_counter()
        with self._lock:
            for i, (now, last) in enumerate(zip(counts, self._last)):
                step = now - last
                if step < 0 and self.wrap_at is not None:
                    step += self.wrap_at[i]
                self._steps += step
            self._last = counts

    def _poll(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self.sample()

    def start(self) -> None:
        """Begin counting from now."""
        self._steps, self._last = 0, self.read_counter()
        self._stopped.clear()
        if self.interval_s is not None:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()

    def stop(self) -> float:
        """Joules since :meth:`start`."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.sample()
        return self._steps * self.unit


def rapl_meter(root: str = POWERCAP_ROOT,
               interval_s: float = 5.) -> Tuple[Optional[EnergyMeter], str]:
    """The CPU packages' RAPL energy, summed over packages.

    Args:
        root (str): The powercap folder. Defaults to ``/sys/class/powercap``.
        interval_s (float): How often the counters are read while measuring. Defaults to 5.

    Returns:
        tuple: (meter, its source) or (None, why there is none).
    """
    zones = sorted(
        path for path in glob.glob(osp.join(root, 'intel-rapl:*'))
        if _PACKAGE_ZONE.match(osp.basename(path)))
    if not zones:
        return None, f'no RAPL package zone under {root}'
    counters = [osp.join(zone, 'energy_uj') for zone in zones]

    def read_counter() -> List[int]:
        values = []
        for path in counters:
            with open(path) as f:
                values.append(int(f.read()))
        return values

    try:
        read_counter()
        wrap_at = []
        for zone in zones:
            with open(osp.join(zone, 'max_energy_range_uj')) as f:
                wrap_at.append(int(f.read()))
    except PermissionError:
        return None, (f'{counters[0]} is readable by root only (grant read access, e.g. '
                      f'chmod a+r, to measure energy)')
    except (OSError, ValueError) as error:
        return None, f'RAPL counters under {root} cannot be read ({error})'
    names = []
    for zone in zones:
        with open(osp.join(zone, 'name')) as f:
            names.append(f.read().strip())
    source = f'RAPL {" + ".join(names)} (whole packages)'
    return EnergyMeter(read_counter, wrap_at, 1e-6, source, interval_s), source


def nvml_meter(device_index: int = 0,
               library: str = 'libnvidia-ml.so.1') -> Tuple[Optional[EnergyMeter], str]:
    """A GPU's NVML total energy.

    Args:
        device_index (int): The NVML index of the GPU. Defaults to 0.
        library (str): The NVML library. Defaults to the driver's ``libnvidia-ml.so.1``.

    Returns:
        tuple: (meter, its source) or (None, why there is none).
    """
    try:
        nvml = ctypes.CDLL(library)
    except OSError:
        return None, f'NVML ({library}) is not installed'
    handle = ctypes.c_void_p()
    if nvml.nvmlInit_v2() != 0 or nvml.nvmlDeviceGetHandleByIndex_v2(
            ctypes.c_uint(device_index), ctypes.byref(handle)) != 0:
        return None, f'NVML cannot open GPU {device_index}'

    def read_counter() -> List[int]:
        millijoules = ctypes.c_ulonglong()
        status = nvml.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(millijoules))
        if status != 0:
            raise RuntimeError(f'nvmlDeviceGetTotalEnergyConsumption failed (status {status})')
        return [millijoules.value]

    try:
        read_counter()
    except RuntimeError:
        return None, f'GPU {device_index} does not report its energy (NVML needs Volta or newer)'
    source = f'NVML total energy of GPU {device_index}'
    return EnergyMeter(read_counter, None, 1e-3, source), source


def energy_meter(device: str) -> Tuple[Optional[EnergyMeter], str]:
    """The meter of a benchmark device: RAPL for 'cpu', NVML for 'cuda'.

    Returns:
        tuple: (meter, its source) or (None, why there is none).
    """
    return rapl_meter() if device == 'cpu' else nvml_meter()
