"""The manifest of a many-image run: one JSON line per input, saying what became of it, and
the test of whether an input's outputs are complete.

``manifest.jsonl`` in the run's output folder holds a record per input, in the order of the
inputs: ``input``, ``output`` (its folder), ``status`` (``'done'``; ``'skipped'``: complete
from an earlier run; ``'failed'``; ``'pending'``: not reached before a signal stopped the
run), ``seconds``, ``peak_memory_gb`` (the input's resident-set peak, or the GPU's
allocation peak, above what the process held before it: what ``predicted_peak_gb``
predicts), ``predicted_peak_gb``, ``outputs``, ``error`` and
``rank`` (the process that ran it). It
is rewritten whole (a temporary file renamed over it) after every input, so a run killed at
any moment leaves the manifest of the inputs finished until then. Under several processes each
writes ``manifest.rank<k>.jsonl`` with its own records, and rank 0 merges them at the end.

Completion is read from the outputs, not from the manifest: an input is complete when its
``summary.json`` (written last, atomically) parses and every output it lists exists.
"""
import glob
import json
import os
import os.path as osp
from typing import Dict, List, Optional, Sequence

from mmlinear.utils.atomic_checkpoint import write_file_atomic

#: The manifest's file name in the run's output folder.
MANIFEST = 'manifest.jsonl'
#: The statuses a record can have.
STATUSES = ('done', 'skipped', 'failed', 'pending')
#: The output an input writes last: its presence marks the others complete.
SUMMARY = 'summary.json'


def rank_manifest(out: str, rank: int) -> str:
    """The manifest that rank ``rank`` writes while a several-process run goes on."""
    return osp.join(out, f'manifest.rank{rank}.jsonl')


def new_record(input_path: str, output: str, status: str, **fields) -> dict:
    """A manifest record.

    Args:
        input_path (str): The image.
        output (str): Its output folder.
        status (str): One of :data:`STATUSES`.
        **fields: ``seconds``, ``peak_memory_gb``, ``predicted_peak_gb``, ``outputs``,
            ``error``, ``rank`` (the process that ran it; missing ones are None, ``outputs``
            an empty list).

    Returns:
        dict: The record.
    """
    if status not in STATUSES:
        raise ValueError(f'status must be one of {STATUSES}, got {status!r}')
    record = dict(
        input=input_path,
        output=output,
        status=status,
        seconds=None,
        peak_memory_gb=None,
        predicted_peak_gb=None,
        outputs=[],
        error=None,
        rank=None)
    unknown = set(fields) - set(record)
    if unknown:
        raise ValueError(f'unknown record fields {sorted(unknown)}; allowed: {sorted(record)}')
    record.update(fields)
    return record


def write_manifest(path: str, records: Sequence[dict]) -> None:
    """Write ``records`` as JSON lines to ``path``, whole or not at all."""
    write_file_atomic(path, ''.join(json.dumps(r) + '\n' for r in records).encode())


def read_manifest(path: str) -> List[dict]:
    """The records of a manifest (none where it does not exist)."""
    if not osp.isfile(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def rank_manifests(out: str) -> List[str]:
    """The ranks' manifests in ``out`` (of this run, or left by a killed one)."""
    return sorted(glob.glob(osp.join(out, 'manifest.rank*.jsonl')))


def merge_rank_manifests(out: str, inputs: Sequence[str], records: Dict[str, dict]) -> List[dict]:
    """Rank 0's end of a several-process run: the records of every ``manifest.rank<k>.jsonl``
    in ``out`` over ``records``, written as ``manifest.jsonl`` in the order of ``inputs``;
    the rank files are then removed.

    Args:
        out (str): The run's output folder.
        inputs (Sequence[str]): The images, in the run's order.
        records (dict[str, dict]): Records by input known before (skipped, pending), which a
            rank's record of the same input replaces.

    Returns:
        list[dict]: The merged records, one per input that has one.
    """
    merged = dict(records)
    rank_files = rank_manifests(out)
    for rank_file in rank_files:
        merged.update((r['input'], r) for r in read_manifest(rank_file))
    ordered = [merged[path] for path in inputs if path in merged]
    write_manifest(osp.join(out, MANIFEST), ordered)
    for rank_file in rank_files:
        os.remove(rank_file)
    return ordered


def stopped_on_signal(out: str, since: float) -> bool:
    """Whether the several-process run in ``out``, sent a signal at ``since``, stopped on it,
    every process after its images in progress.

    Such a run's rank 0 merged the ranks' manifests (none is left) into a ``manifest.jsonl``
    written after the signal that records inputs ``pending``. A launcher that exits with a
    status of its own when it passes a signal on (torchrun) thus still gives a job script
    the requeue status: a run whose processes were killed before the merge leaves no
    manifest written after the signal (rank 0 writes it when the run starts and at the end
    only), or a rank manifest.

    Args:
        out (str): The run's output folder.
        since (float): When the signal was sent (seconds since the epoch, as
            ``time.time()``).

    Returns:
        bool: True when the run stopped that way.
    """
    manifest = osp.join(out, MANIFEST)
    if rank_manifests(out) or not osp.exists(manifest) or osp.getmtime(manifest) < since:
        return False
    return any(r['status'] == 'pending' for r in read_manifest(manifest))


def completed_outputs(input_path: str, planned: Sequence[str]) -> Optional[List[str]]:
    """The outputs of ``input_path`` if an earlier run completed them, else None.

    Complete means: the summary (the last of ``planned``) parses, names this input (the same
    real path) and lists outputs that all exist, ``planned`` among them. A folder a killed run
    left (outputs without a summary, a summary of another image) is not complete.

    Args:
        input_path (str): The image.
        planned (Sequence[str]): The outputs this run would write, the summary last.

    Returns:
        list[str] or None: The summary's outputs.
    """
    try:
        with open(planned[-1]) as f:
            summary = json.load(f)
    except (OSError, ValueError):
        return None
    outputs = summary.get('outputs') if isinstance(summary, dict) else None
    if not isinstance(outputs, list) or osp.realpath(str(summary.get('image'))) != \
            osp.realpath(input_path):
        return None
    listed = {osp.realpath(str(path)) for path in outputs}
    if not {osp.realpath(p) for p in planned} <= listed or not all(osp.isfile(p) for p in listed):
        return None
    return outputs
