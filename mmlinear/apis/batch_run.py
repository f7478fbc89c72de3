"""Many images through one function as a run: resumable, one bad input recorded and never
fatal, shared between the processes of a torchrun / Slurm job, and stopped cleanly by the
signals a scheduler sends.

:func:`run_batch` gives each input its own output folder under the run's (named by
:func:`~mmlinear.apis.image_batch.output_names`), skips the inputs an earlier run completed
(:func:`~mmlinear.apis.run_manifest.completed_outputs`), runs the rest through the function it
is given and keeps the manifest (:mod:`mmlinear.apis.run_manifest`). Where a
``torch.distributed`` group is initialised, the inputs left to do are shared between its ranks
by pixels (the largest first, each to the rank with the fewest pixels so far), so that each
input is done once and one huge image does not leave the other ranks idle while it is the
last of a rank; every rank writes its inputs' folders and its own manifest, which rank 0
merges at the end. SIGTERM and SIGUSR1 let the current input finish, then stop the run with
:data:`~mmlinear.engine.hooks.REQUEUE_EXIT_CODE` as the status to exit with; running the
same command again goes on with the inputs not complete.
"""
import contextlib
import os
import os.path as osp
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
import torch.distributed as dist

from mmlinear.engine.hooks import REQUEUE_EXIT_CODE
from mmlinear.utils.progress import ProgressETA
from .image_batch import output_names
from .large_image_inputs import open_image
from .run_manifest import (MANIFEST, completed_outputs, merge_rank_manifests, new_record,
                           rank_manifest, rank_manifests, read_manifest, write_manifest)

#: The signals that stop a run after the current input (a scheduler's warnings).
STOP_SIGNALS = ('SIGTERM', 'SIGUSR1')


@dataclass
class BatchResult:
    """What a run did.

    Attributes:
        records (list[dict]): The manifest records (rank 0 of a several-process run: of every
            input; another rank: of its own inputs and the skipped ones).
        failed (int): Inputs that failed, over all ranks.
        total (int): Inputs of the run.
        stopped_by (str or None): The signal that stopped the run (on any rank), else None.
        exit_code (int): 0; 1 when an input failed; :data:`REQUEUE_EXIT_CODE` when a signal
            stopped the run.
        failures (list[dict]): The records of the failed inputs (rank 0 of a several-process
            run: of every rank).
    """
    records: List[dict]
    failed: int
    total: int
    stopped_by: Optional[str] = None
    exit_code: int = 0
    failures: List[dict] = field(default_factory=list)


def image_pixels(path: str) -> int:
    """The pixels of an image (its header read), 0 where it cannot be opened (it will fail
    quickly)."""
    try:
        image = open_image(path)
        return int(image.shape[0]) * int(image.shape[1])
    except Exception:  # an unreadable input is recorded when it is run, not here
        return 0


def share_by_pixels(pixels: Sequence[int], world_size: int) -> List[List[int]]:
    """Share the inputs between ``world_size`` ranks by pixels: the largest first, each to the
    rank with the fewest pixels so far (ties to the lower rank), so the ranks' totals differ by
    at most the largest input.

    Args:
        pixels (Sequence[int]): The pixels of each input.
        world_size (int): The ranks.

    Returns:
        list[list[int]]: The indices of the inputs of each rank, in increasing order.
    """
    loads = [0] * world_size
    shares: List[List[int]] = [[] for _ in range(world_size)]
    for index in sorted(range(len(pixels)), key=lambda i: (-pixels[i], i)):
        rank = min(range(world_size), key=lambda r: (loads[r], r))
        shares[rank].append(index)
        loads[rank] += pixels[index]
    return [sorted(share) for share in shares]


class StopSignals:
    """Record SIGTERM / SIGUSR1 instead of dying on them, while in the ``with`` block.

    :func:`run_batch` holds one over its inputs. A caller that enters one earlier and passes it
    to :func:`run_batch` also stops the run on a signal that arrives before the first input
    (while a model loads, or while the processes of a job meet): every input is then left
    ``pending`` and the run ends with the requeue status, where the signal's default action
    would kill the process with a status the job scripts do not requeue.

    Attributes:
        received (str or None): The name of the first signal received, else None.
    """

    def __init__(self) -> None:
        self.received = None
        self._previous: Dict[int, Any] = {}

    def _record(self, signum: int, frame) -> None:
        # Only record: the input in progress finishes and its outputs are written whole.
        self.received = self.received or signal.Signals(signum).name

    def __enter__(self) -> 'StopSignals':
        if threading.current_thread() is threading.main_thread():
            for name in STOP_SIGNALS:
                signum = signal.Signals[name].value
                self._previous[signum] = signal.signal(signum, self._record)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _dist_info() -> tuple:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _global_sum(values: Sequence[int]) -> List[int]:
    """``values`` summed over the ranks (themselves without a group)."""
    tensor = torch.tensor(list(values), dtype=torch.int64)
    if _dist_info()[1] > 1:
        dist.all_reduce(tensor)
    return tensor.tolist()


def _failure(error: BaseException) -> str:
    return f'{type(error).__name__}: {error}'


def run_batch(inputs: Sequence[str],
              out: str,
              process: Callable[[str, str], dict],
              planned_outputs: Callable[[str], List[str]],
              force: bool = False,
              printer: Optional[Callable[[str], None]] = None,
              stop_signals: Optional[StopSignals] = None) -> BatchResult:
    """Run ``process`` on each input not yet complete, recording each in the manifest.

    Args:
        inputs (Sequence[str]): The images, each once (the same list on every rank).
        out (str): The run's output folder; input ``i`` writes to ``out/<name i>``.
        process (Callable[[str, str], dict]): ``process(image, folder)`` writes the image's
            outputs into ``folder``, the summary last, and returns the summary: a dict with
            ``outputs`` (the paths written), ``seconds``, ``predicted_peak_gb`` and
            ``peak_memory_gb``. Any exception it raises fails that input alone.
        planned_outputs (Callable[[str], list[str]]): The outputs ``process`` would write to a
            folder, the summary last (what makes an input complete).
        force (bool): Run every input, complete or not. Defaults to False.
        printer (Callable[[str], None], optional): Where the progress lines go. Defaults to
            ``print`` with flush.
        stop_signals (StopSignals, optional): One the caller has entered already, so that a
            signal received before this call stops the run before its first input. Defaults
            to one held over the inputs only.

    Returns:
        BatchResult: The records, the failures and the status to exit with.
    """
    printer = printer or (lambda line: print(line, flush=True))
    rank, world_size = _dist_info()
    folders = [osp.join(out, name) for name in output_names(inputs)]
    os.makedirs(out, exist_ok=True)
    records: Dict[str, dict] = {r['input']: r for r in read_manifest(osp.join(out, MANIFEST))}
    todo = []
    for index, (path, folder) in enumerate(zip(inputs, folders)):
        outputs = None if force else completed_outputs(path, planned_outputs(folder))
        if outputs is None:
            todo.append(index)
            # Until a rank runs it (a signal may come first); a failure or a success replaces it.
            records[path] = new_record(path, folder, 'pending')
        elif records.get(path, {}).get('status') not in ('done', 'skipped'):
            records[path] = new_record(path, folder, 'skipped', outputs=outputs)
        else:
            records[path] = dict(records[path], status='skipped')
    if rank == 0:
        # What a killed several-process run left would be merged with this run's records.
        for stale in rank_manifests(out):
            os.remove(stale)
    if world_size > 1:
        # No rank writes before every rank has judged what is complete and rank 0 has cleared
        # the old rank manifests.
        dist.barrier()
        pixels = [image_pixels(inputs[i]) for i in todo]
        mine = [todo[i] for i in share_by_pixels(pixels, world_size)[rank]]
        manifest = rank_manifest(out, rank)
        own: Dict[str, dict] = {}
        prefix = f'[rank {rank}] '
    else:
        mine, manifest, own, prefix = todo, osp.join(out, MANIFEST), records, ''
    printer(f'{prefix}{len(inputs)} inputs: {len(inputs) - len(todo)} complete from an earlier '
            f'run (skipped), {len(todo)} to do' +
            (f', {len(mine)} of them in this process' if world_size > 1 else ''))
    if rank == 0:
        write_manifest(osp.join(out, MANIFEST), [records[p] for p in inputs])
    progress = ProgressETA(len(mine), printer=lambda line: printer(prefix + line))
    with contextlib.nullcontext(stop_signals) if stop_signals else StopSignals() as stop:
        for index in mine:
            if stop.received:
                break
            path, folder = inputs[index], folders[index]
            start = time.perf_counter()
            try:
                # The summary marks the folder complete: gone until the outputs are rewritten.
                summary_path = planned_outputs(folder)[-1]
                if osp.exists(summary_path):
                    os.remove(summary_path)
                summary = process(path, folder)
                record = new_record(
                    path,
                    folder,
                    'done',
                    seconds=summary['seconds'],
                    peak_memory_gb=summary['peak_memory_gb'],
                    predicted_peak_gb=summary['predicted_peak_gb'],
                    outputs=summary['outputs'],
                    rank=rank)
                line = (f'{path}: done in {record["seconds"]:.1f} s, peak '
                        f'{record["peak_memory_gb"]:.3f} GB (predicted '
                        f'{record["predicted_peak_gb"]:.3f} GB) -> {folder}')
            except Exception as error:  # one bad input is recorded, never fatal
                record = new_record(
                    path,
                    folder,
                    'failed',
                    seconds=round(time.perf_counter() - start, 2),
                    error=_failure(error),
                    rank=rank)
                line = f'{path}: FAILED ({record["error"]})'
            own[path] = record
            write_manifest(manifest, [own[p] for p in inputs if p in own])
            progress.step(line)
    if world_size > 1:
        records.update(own)
    stopped, failed = _global_sum(
        [stop.received is not None,
         len([r for r in own.values() if r['status'] == 'failed'])])
    if world_size > 1:
        dist.barrier()
        if rank == 0:
            records = {r['input']: r for r in merge_rank_manifests(out, inputs, records)}
        dist.barrier()
    ordered = [records[p] for p in inputs]
    exit_code = REQUEUE_EXIT_CODE if stopped else (1 if failed else 0)
    return BatchResult(
        records=ordered,
        failed=failed,
        total=len(inputs),
        stopped_by=stop.received or ('a signal to another rank' if stopped else None),
        exit_code=exit_code,
        failures=[r for r in ordered if r['status'] == 'failed'])
