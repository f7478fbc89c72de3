"""Measuring in a fresh Python process: the one launcher of every benchmark of mmlinear.

A fresh process per measurement keeps one case's peak memory, loaded libraries and thread
pools from reaching the next. It needs the standard library alone, so that
``tools/analysis_tools/benchmark_ops.py`` runs where only torch is installed (the bare image
of ``tools/gpu_check.sh``); :mod:`mmlinear.cli.benchmark` starts its workers with it
too.
"""
import json
import os
import os.path as osp
import subprocess
import sys
from typing import Dict, Optional, Sequence

RESULT_PREFIX = 'BENCHMARK_RESULT '


class WorkerFailed(RuntimeError):
    """A worker process that ended without printing a result.

    Args:
        returncode (int): Its exit status (negative: killed by that signal).
        stderr (str): What it wrote to stderr.
    """

    def __init__(self, returncode: int, stderr: str) -> None:
        super().__init__(f'worker exited with status {returncode}:\n{stderr[-3000:]}')
        self.returncode = returncode
        self.stderr = stderr


def run_in_fresh_process(argv: Sequence[str],
                         payload: dict,
                         timeout: Optional[float] = None,
                         env: Optional[Dict[str, str]] = None) -> dict:
    """Run ``python <argv> <payload as JSON>`` and return the result it printed.

    The one way the benchmarks start a measurement in a fresh interpreter, so that one case's
    peak memory, loaded libraries and thread pools do not reach the next. The worker finds
    the same mmlinear as this process (its folder leads ``PYTHONPATH``) and prints its result
    with :func:`print_result`.

    Args:
        argv (Sequence[str]): The interpreter's arguments before the payload: ``['-c', code]``
            or a script and its options.
        payload (dict): What to measure, passed as the last argument (JSON).
        timeout (float, optional): Seconds after which the worker is killed
            (``subprocess.TimeoutExpired``). Defaults to None (no limit).
        env (dict[str, str], optional): Variables added to this process's environment.

    Returns:
        dict: The worker's result.

    Raises:
        WorkerFailed: If the worker printed no result (its status and stderr).
    """
    import mmlinear

    package_root = osp.dirname(osp.dirname(osp.abspath(mmlinear.__file__)))
    environ = {**os.environ, **(env or {})}
    environ['PYTHONPATH'] = os.pathsep.join(
        p for p in (package_root, environ.get('PYTHONPATH')) if p)
    proc = subprocess.run([sys.executable, *argv, json.dumps(payload)],
                          capture_output=True,
                          text=True,
                          timeout=timeout,
                          env=environ)
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    raise WorkerFailed(proc.returncode, proc.stderr)


def print_result(result: dict) -> None:
    """Print a worker's result as the one line :func:`run_in_fresh_process` reads."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)
