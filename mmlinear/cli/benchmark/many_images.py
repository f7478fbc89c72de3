"""The runs of the many-image benchmark and their checks: ``tools/inference/large_image.py``
over a folder in one process, sharded over torchrun, one image at a time, and killed half-way
then run again (``tools/analysis_tools/benchmark_many_images.py`` is the command line).

Each run is a fresh process (its wall time is what a user waits for: start-up and model
loading included); outputs are compared file by file with a reference run's.
"""
import json
import os.path as osp
import signal
import subprocess
import time
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence

from mmlinear.apis.run_manifest import read_manifest

#: Absolute and relative tolerance of detection boxes and scores between two runs.
DETECTION_TOLERANCE = 1e-4


class RunResult(NamedTuple):
    """One run of the tool.

    Attributes:
        seconds (float): Wall time from start to exit.
        returncode (int): Its exit status (-9 for a run this module killed).
        log (str): The file holding its stdout and stderr.
    """
    seconds: float
    returncode: int
    log: str


def run_timed(command: Sequence[str], env: Mapping[str, str], log: str) -> RunResult:
    """Run ``command`` to its end, its output into ``log``.

    Args:
        command (Sequence[str]): The command line.
        env (Mapping[str, str]): Its environment.
        log (str): The file for its stdout and stderr.

    Returns:
        RunResult: The wall time, exit status and log.
    """
    with open(log, 'w') as out:
        start = time.perf_counter()
        returncode = subprocess.call(list(command), env=dict(env), stdout=out, stderr=out)
    return RunResult(time.perf_counter() - start, returncode, log)


def manifest_statuses(manifest: str) -> Dict[str, str]:
    """input -> status of a run's manifest (empty while it does not exist yet)."""
    return {r['input']: r['status'] for r in read_manifest(manifest)}


def run_killed_after(command: Sequence[str], env: Mapping[str, str], log: str, manifest: str,
                     done: int) -> List[str]:
    """Start ``command`` and kill it with SIGKILL once its manifest records ``done`` inputs
    done (or failed): what a node lost to the scheduler leaves.

    Args:
        command (Sequence[str]): The run's command line (one process).
        env (Mapping[str, str]): Its environment.
        log (str): The file for its stdout and stderr.
        manifest (str): Its ``manifest.jsonl``, rewritten after every input.
        done (int): Inputs finished before the kill.

    Returns:
        list[str]: The inputs the manifest said were done when the kill came.

    Raises:
        RuntimeError: The run ended before reaching ``done`` inputs.
    """
    with open(log, 'w') as out:
        process = subprocess.Popen(list(command), env=dict(env), stdout=out, stderr=out)
        while True:
            statuses = manifest_statuses(manifest)
            finished = [p for p, s in statuses.items() if s in ('done', 'failed')]
            if len(finished) >= done:
                process.send_signal(signal.SIGKILL)
                process.wait()
                return [p for p, s in statuses.items() if s == 'done']
            if process.poll() is not None:
                raise RuntimeError(f'the run ended (status {process.returncode}) after '
                                   f'{len(finished)} inputs, before the kill after {done}; see '
                                   f'{log}')
            time.sleep(0.05)


def detections_differ(reference: str, other: str) -> Optional[str]:
    """Where two ``detections.json`` differ beyond :data:`DETECTION_TOLERANCE` (boxes,
    scores), or in count, classes or masks; None when they agree."""
    with open(reference) as f:
        expected = json.load(f)['annotations']
    with open(other) as f:
        got = json.load(f)['annotations']
    if len(expected) != len(got):
        return f'{len(got)} detections against {len(expected)}'
    for index, (a, b) in enumerate(zip(expected, got)):
        if a['category_id'] != b['category_id'] or a['segmentation'] != b['segmentation']:
            return f'detection {index}: another class or mask'
        for key in ('bbox', 'score'):
            x = a[key] if isinstance(a[key], list) else [a[key]]
            y = b[key] if isinstance(b[key], list) else [b[key]]
            if any(abs(u - v) > DETECTION_TOLERANCE * max(1.0, abs(u)) for u, v in zip(x, y)):
                return f'detection {index}: {key} {b[key]} against {a[key]}'
    return None


def outputs_differ(reference: str, other: str) -> Optional[str]:
    """Where the outputs of one image in two output folders differ, or None when they agree:
    a class map byte for byte, detections to :data:`DETECTION_TOLERANCE`.

    Args:
        reference (str): The image's folder in the reference run.
        other (str): Its folder in the run checked.

    Returns:
        str | None: What differs (a missing file included), or None.
    """
    compared = 0
    for name in ('class_map.tif', 'probabilities.tif', 'detections.json'):
        expected = osp.join(reference, name)
        if not osp.exists(expected):
            continue
        got = osp.join(other, name)
        if not osp.exists(got):
            return f'{got} is missing'
        compared += 1
        if name == 'detections.json':
            difference = detections_differ(expected, got)
            if difference:
                return f'{name}: {difference}'
            continue
        with open(expected, 'rb') as a, open(got, 'rb') as b:
            if a.read() != b.read():
                return f'{name} differs'
    return None if compared else f'{reference} holds no output to compare'
