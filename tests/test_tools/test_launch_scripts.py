"""The launch scripts refuse bad settings before they start anything, naming what is allowed."""
import os
import subprocess

import pytest
from conftest import REPO_ROOT


@pytest.mark.parametrize('script, args, variable, value, message', [
    ('dist_train.sh', ['CONFIG', '2'], 'MAX_RESTARTS', '-1',
     "MAX_RESTARTS must be a whole number >= 0 (0: no restarts), got '-1'"),
    ('dist_train.sh', ['CONFIG', '2'], 'MAX_RESTARTS', 'many',
     "MAX_RESTARTS must be a whole number >= 0 (0: no restarts), got 'many'"),
    ('slurm_train.sh', ['PARTITION', 'JOB', 'CONFIG', 'WORK_DIR'], 'SIGNAL_SECONDS', '2m',
     "SIGNAL_SECONDS must be a whole number of seconds, 0-65535, got '2m'"),
    ('slurm_train.sh', ['PARTITION', 'JOB', 'CONFIG', 'WORK_DIR'], 'SIGNAL_SECONDS', '70000',
     "SIGNAL_SECONDS must be a whole number of seconds, 0-65535, got '70000'"),
    ('slurm_infer.sh', ['PARTITION', 'JOB', 'INPUTS', 'CONFIG', 'CHECKPOINT', 'OUT'],
     'SIGNAL_SECONDS', '2m', "SIGNAL_SECONDS must be a whole number of seconds, 0-65535, got '2m'"),
    ('dist_infer.sh', ['INPUTS', 'CONFIG', 'CHECKPOINT', 'OUT', '2'], 'GRACE_SECONDS', '-1',
     "GRACE_SECONDS must be a whole number of seconds, got '-1'"),
])
def test_bad_settings_are_refused(script, args, variable, value, message):
    result = subprocess.run(['bash', f'tools/{script}', *args],
                            cwd=REPO_ROOT,
                            capture_output=True,
                            text=True,
                            env=dict(os.environ, **{variable: value}))
    assert result.returncode == 2
    assert result.stderr.strip() == message
