"""``tools/dist_train.sh CONFIG 2`` trains with two gloo processes on a CPU-only machine."""
import glob
import os
import os.path as osp
import socket
import subprocess
import sys
import textwrap

from conftest import REPO_ROOT
from test_train_test_e2e import cls_config

# Records, in every Python process of the run, each file whose name ends in .pth that is
# opened for writing or made by a rename (mmlinear writes a temporary file, then renames it),
# with the process's rank (an audit hook sees every open() and rename, whoever calls it).
WRITE_AUDIT = '''
import os
import sys


def _record_checkpoint_writes(event, args):
    written = None
    if event == 'open' and isinstance(args[1], str) and ('w' in args[1] or 'a' in args[1]):
        written = args[0]
    elif event == 'os.rename':
        written = args[1]
    if isinstance(written, str) and written.endswith('.pth'):
        with open(os.environ['MMLINEAR_WRITE_AUDIT'], 'a') as log:
            log.write(f"{os.environ.get('RANK', '-')} {written}\\n")


sys.addaudithook(_record_checkpoint_writes)
'''


def free_port() -> int:
    """A TCP port free at this moment: a fixed one would collide with another suite running
    the same test on this machine at the same time."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_two_processes_finish_and_write_each_checkpoint_once(tiny_data, tmp_path):
    work_dir = str(tmp_path / 'work')
    audit_dir = tmp_path / 'audit'
    audit_dir.mkdir()
    (audit_dir / 'sitecustomize.py').write_text(textwrap.dedent(WRITE_AUDIT))
    audit_log = tmp_path / 'writes.txt'
    env = dict(
        os.environ,
        PYTHON=sys.executable,
        PORT=str(free_port()),
        PYTHONPATH=f"{audit_dir}:{os.environ.get('PYTHONPATH', '')}",
        MMLINEAR_WRITE_AUDIT=str(audit_log),
        # torchrun options by environment: one log folder per rank
        PET_LOG_DIR=str(tmp_path / 'ranks'),
        PET_TEE='3')
    result = subprocess.run([
        'bash', 'tools/dist_train.sh',
        cls_config(tmp_path, tiny_data, epochs=2), '2', '--work-dir', work_dir
    ],
                            cwd=REPO_ROOT,
                            capture_output=True,
                            text=True,
                            env=env)
    # torchrun exits 0 only when every rank has exited 0.
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert 'Distributed training: True' in result.stdout + result.stderr
    rank_logs = sorted(glob.glob(str(tmp_path / 'ranks' / '*' / 'attempt_0' / '*')))
    assert [osp.basename(p) for p in rank_logs] == ['0', '1']
    writes = audit_log.read_text().split()
    checkpoint_writes = list(zip(writes[::2], writes[1::2]))
    assert sorted(checkpoint_writes) == [('0', osp.join(work_dir, 'epoch_1.pth')),
                                         ('0', osp.join(work_dir, 'epoch_2.pth'))]
