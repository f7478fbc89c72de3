"""Shared fixtures. ``tests/`` has no ``__init__.py``: the mmseg wheel ships a top-level
``tests`` package that would shadow ours."""
import os
import os.path as osp
import subprocess
import sys

import pytest

REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity, capped by a cgroup v2 CPU quota.

    A container often shows all the host's cores while its quota allows two; torch would then
    start a thread per visible core and the threads would mostly wait for each other.
    """
    cpus = len(os.sched_getaffinity(0))
    try:
        with open('/sys/fs/cgroup/cpu.max') as f:
            quota, period = f.read().split()
        if quota != 'max':
            cpus = min(cpus, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return cpus


# Before torch is imported (here and in the tools the tests start), unless the caller chose;
# pytest-xdist workers (`make test` runs two) share the CPUs.
workers = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1'))
os.environ.setdefault('OMP_NUM_THREADS', str(max(1, usable_cpus() // workers)))


def pytest_addoption(parser):
    parser.addoption('--run-slow', action='store_true', help='also run tests marked slow')


def pytest_collection_modifyitems(config, items):
    if config.getoption('--run-slow'):
        return
    skip = pytest.mark.skip(reason='slow: run with --run-slow (make test-all)')
    for item in items:
        if 'slow' in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope='session')
def repo_root() -> str:
    return REPO_ROOT


@pytest.fixture
def mmengine_log():
    """The messages logged through mmengine's current logger while the test runs (a list
    that fills as they come)."""
    import logging

    from mmengine.logging import MMLogger  # here: the op tests run without mmengine
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    yield messages
    logger.removeHandler(handler)


@pytest.fixture(scope='session')
def tiny_data(tmp_path_factory) -> str:
    """The bundled shapes sets at 5% size (deterministic), written once per session."""
    out = str(tmp_path_factory.mktemp('data') / 'shapes')
    subprocess.run([
        sys.executable,
        osp.join(REPO_ROOT, 'tools/misc/make_tiny_datasets.py'), '--out', out, '--scale', '0.05'
    ],
                   check=True,
                   capture_output=True)
    return out
