"""Checkpoints that cannot tear: whole files or nothing, and a marker that names whole files.

mmengine 0.10.7 writes a checkpoint with ``LocalBackend.put``, an ``open(path, 'wb')`` and one
``write``: a kill, a crash or a full disk during the write leaves a torn file under the final
name. ``CheckpointHook._save_checkpoint_with_step`` also deletes the oldest kept checkpoint
*before* writing the new one, then rewrites ``last_checkpoint`` in place, so a failed write can
leave the run with one checkpoint fewer and a marker that is empty or names a torn file.

The shim in :mod:`mmlinear.engine.upstream_shims` replaces both, process-wide:

- ``mmengine.runner.checkpoint.save_checkpoint`` (and the names ``mmengine.runner`` and
  ``mmengine.runner.runner`` import it under) writes local files with
  :func:`write_file_atomic`: a temporary file in the same folder, flushed and fsynced, then
  renamed over the final name (``os.replace`` is atomic on POSIX file systems) and the folder
  fsynced. Other backends (``s3://``, ``pavi://`` ...) keep mmengine's writer.
- ``CheckpointHook._save_checkpoint_with_step`` (:func:`save_checkpoint_with_step`) writes
  the new checkpoint first, then the
  marker (atomically), and only then deletes the checkpoint that ``max_keep_ckpts`` drops.

A write that fails (``ENOSPC``, ``EIO``, a kill) therefore leaves every earlier checkpoint and
``last_checkpoint`` as they were; an ``OSError`` names the file and says so.
"""
import errno
import io
import os
import os.path as osp
import tempfile
from typing import Optional

import mmengine.runner.checkpoint
import torch
from mmengine.dist import is_main_process
from mmengine.fileio import LocalBackend, get_file_backend
from mmengine.hooks import CheckpointHook

# mmengine's own writer, kept for the backends that are not local files; taken before the shim
# replaces it (the shim imports this module first).
_upstream_save_checkpoint = mmengine.runner.checkpoint.save_checkpoint
#: The temporary files are ``.<name>.<random>.tmp`` beside the file they become.
TMP_SUFFIX = '.tmp'
#: The file in the work dir that names the newest complete checkpoint (mmengine's name).
MARKER = 'last_checkpoint'


def _write_all(f, data: bytes) -> None:
    """Write ``data`` to the open file ``f`` (a separate function so that tests can make the
    writer fail or die part-way, as a full disk or a kill would)."""
    f.write(data)


def _fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable (without it a power loss may undo it)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_file_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that ``path`` holds either its old content or all of
    ``data``, never a part.

    Args:
        path (str): The local file to (over)write; its folder is created if needed.
        data (bytes): The whole content.

    The content goes to a temporary file beside ``path`` first (one that a killed earlier
    write of ``path`` left is removed), which is flushed, fsynced and renamed to ``path``.

    Raises:
        OSError: If writing fails (e.g. ``ENOSPC``); the message names ``path`` and says that
            it was left unchanged. The temporary file is removed.
    """
    directory = osp.dirname(osp.abspath(path))
    os.makedirs(directory, exist_ok=True)
    prefix = f'.{osp.basename(path)}.'
    # What a killed earlier write of this file left behind (one writer per file: rank 0).
    for name in os.listdir(directory):
        if name.startswith(prefix) and name.endswith(TMP_SUFFIX):
            os.remove(osp.join(directory, name))
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=TMP_SUFFIX, dir=directory)
    try:
        # mkstemp creates the file 0600; give it the permissions open() would.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, 'wb') as f:
            _write_all(f, data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        if isinstance(error, OSError):
            reason = os.strerror(error.errno) if error.errno else str(error)
            hint = ' (the disk is full: free space, then resume)' \
                if error.errno == errno.ENOSPC else ''
            raise OSError(
                error.errno, f'cannot write {path}: {reason}{hint}; {path} and every earlier '
                'checkpoint and last_checkpoint were left as they were') from error
        raise
    _fsync_dir(directory)


def write_last_checkpoint(work_dir: str, checkpoint: str) -> None:
    """Point ``<work_dir>/last_checkpoint`` at ``checkpoint``, atomically.

    Args:
        work_dir (str): The run's work dir.
        checkpoint (str): The complete checkpoint it names.
    """
    write_file_atomic(osp.join(work_dir, MARKER), checkpoint.encode())


def save_checkpoint(checkpoint: dict,
                    filename: str,
                    file_client_args: Optional[dict] = None,
                    backend_args: Optional[dict] = None) -> None:
    """``mmengine.runner.checkpoint.save_checkpoint`` with atomic writes of local files.

    Args:
        checkpoint (dict): What to save (``torch.save``).
        filename (str): Where; a local path is written with :func:`write_file_atomic`, any
            other backend with mmengine's own writer.
        file_client_args (dict, optional): As for mmengine (deprecated there).
        backend_args (dict, optional): As for mmengine.
    """
    if file_client_args is None and not filename.startswith('pavi://') and \
            isinstance(get_file_backend(filename, backend_args=backend_args), LocalBackend):
        with io.BytesIO() as buffer:
            torch.save(checkpoint, buffer)
            write_file_atomic(filename, buffer.getvalue())
        return
    _upstream_save_checkpoint(checkpoint, filename, file_client_args, backend_args)


def _remove_checkpoint(hook: CheckpointHook, step: int) -> None:
    path = hook.file_backend.join_path(hook.out_dir, hook.filename_tmpl.format(step))
    if hook.file_backend.isfile(path):
        hook.file_backend.remove(path)
    elif hook.file_backend.isdir(path):  # checkpoints saved by deepspeed are folders
        hook.file_backend.rmtree(path)


def save_checkpoint_with_step(self: CheckpointHook, runner, step: int, meta: dict) -> None:
    """``CheckpointHook._save_checkpoint_with_step`` of mmengine 0.10.7, reordered: save, then
    update the marker, then delete what ``max_keep_ckpts`` drops."""
    outdated = None
    # The saved message hub must already list the new step among the kept ones, as upstream.
    if self.max_keep_ckpts > 0 and not (self.keep_ckpt_ids and self.keep_ckpt_ids[-1] == step):
        if len(self.keep_ckpt_ids) == self.max_keep_ckpts:
            outdated = self.keep_ckpt_ids.popleft()
        self.keep_ckpt_ids.append(step)
        runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))

    ckpt_filename = self.filename_tmpl.format(step)
    self.last_ckpt = self.file_backend.join_path(self.out_dir, ckpt_filename)
    runner.message_hub.update_info('last_ckpt', self.last_ckpt)
    runner.save_checkpoint(
        self.out_dir,
        ckpt_filename,
        self.file_client_args,
        save_optimizer=self.save_optimizer,
        save_param_scheduler=self.save_param_scheduler,
        meta=meta,
        by_epoch=self.by_epoch,
        backend_args=self.backend_args,
        **self.args)
    if not is_main_process():
        return
    write_last_checkpoint(runner.work_dir, self.last_ckpt)
    if outdated is not None:
        _remove_checkpoint(self, outdated)


__all__ = [
    'MARKER', 'save_checkpoint', 'save_checkpoint_with_step', 'write_file_atomic',
    'write_last_checkpoint'
]
