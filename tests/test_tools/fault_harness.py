"""What the fault tests share: test-only faults injected into a training process."""
import os
import textwrap

# Imported by the training process through `custom_imports` (the module is written into a
# folder on its PYTHONPATH).
FAULT_HOOKS = '''
import errno
import os
import signal

from mmlinear.utils import atomic_checkpoint

# FAULT_AT_WRITE=N makes the N-th atomic write of the process fail (each checkpoint is one
# write, then one for last_checkpoint): FAULT_KIND=kill writes half of it, then the process
# SIGKILLs itself (a kill during the write); FAULT_KIND=enospc raises ENOSPC (a full disk).
_writes = [0]
_write_all = atomic_checkpoint._write_all


def _faulty_write_all(f, data):
    _writes[0] += 1
    if _writes[0] == int(os.environ['FAULT_AT_WRITE']):
        if os.environ['FAULT_KIND'] == 'kill':
            f.write(data[:len(data) // 2])
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    _write_all(f, data)


if os.environ.get('FAULT_AT_WRITE'):
    atomic_checkpoint._write_all = _faulty_write_all
'''


def hooks_dir(tmp_path) -> str:
    """A folder holding the module ``fault_hooks`` (add it to the run's PYTHONPATH)."""
    folder = tmp_path / 'fault_hooks'
    folder.mkdir(exist_ok=True)
    (folder / 'fault_hooks.py').write_text(textwrap.dedent(FAULT_HOOKS))
    return str(folder)


def env_with(*paths, **variables) -> dict:
    """The environment with ``paths`` in front of PYTHONPATH, and ``variables``."""
    path = os.pathsep.join([*paths, os.environ.get('PYTHONPATH', '')])
    return dict(os.environ, PYTHONPATH=path, **variables)


def with_fault_hooks(body: str, hooks) -> str:
    """Config lines that import ``fault_hooks`` and set ``custom_hooks`` to ``hooks`` (config
    source strings; a child's list replaces its base's, so a config's own hooks go in too)."""
    return body + (f"\ncustom_imports = dict(imports=['mmlinear.models', 'fault_hooks'], "
                   f"allow_failed_imports=False)\ncustom_hooks = [{', '.join(hooks)}]\n")
