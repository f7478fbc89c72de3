"""Shared fixtures. ``tests/`` has no ``__init__.py``: the mmseg wheel ships a top-level
``tests`` package that would shadow ours."""
import os.path as osp
import subprocess
import sys

import pytest

REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


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


@pytest.fixture(scope='session')
def tiny_data(tmp_path_factory) -> str:
    """The bundled shapes sets at 5% size (deterministic), written once per session."""
    out = str(tmp_path_factory.mktemp('data') / 'shapes')
    subprocess.run([
        sys.executable,
        osp.join(REPO_ROOT, 'tools/misc/make_tiny_datasets.py'), '--out', out, '--scale', '0.05'
    ], check=True, capture_output=True)
    return out
