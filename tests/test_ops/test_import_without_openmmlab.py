"""``mmlinear.ops`` and ``mmlinear._ext`` need torch alone (a bare GPU image has no mmengine):
checked in a fresh interpreter in which every OpenMMLab package fails to import."""
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from typing import List

import pytest

BLOCKED = ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmpretrain')

SCRIPT = textwrap.dedent(f'''
    import importlib.abc
    import importlib.util
    import sys

    BLOCKED = {BLOCKED!r}


    class NoOpenMMLab(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split('.')[0] in BLOCKED:
                raise ImportError(f'{{name}} is not installed here')


    sys.meta_path.insert(0, NoOpenMMLab())
    find_spec = importlib.util.find_spec
    importlib.util.find_spec = (
        lambda name, *args: None if name.split('.')[0] in BLOCKED else find_spec(name, *args))

    import torch
    import mmlinear.ops as ops
    q = torch.randn(1, 2, 8, 4, dtype=torch.float64)
    rho = torch.tensor(0.9, dtype=torch.float64)
    torch.testing.assert_close(ops.linear_infsa_query_sums(q),
                               ops.linear_infsa_query_sums_reference(q))
    torch.testing.assert_close(ops.pure_infsa(q, q, q, rho), ops.pure_infsa_reference(q, q, q, rho))
    loaded = [name for name in sys.modules if name.split('.')[0] in BLOCKED]
    assert not loaded, loaded
    print('ok', ops.__name__)
''')


def test_mmlinear_ops_imports_and_runs_without_openmmlab_packages():
    result = subprocess.run([sys.executable, '-c', SCRIPT],
                            capture_output=True,
                            text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'ok mmlinear.ops'


def test_mmlinear_ext_imports_first_without_openmmlab_packages():
    """``import mmlinear._ext`` as the first import of the process (torch not imported yet)."""
    pytest.importorskip('mmlinear._ext')
    head, _ = SCRIPT.split('\nimport torch\n')
    script = head + "\nimport mmlinear._ext as ext\nprint('ok', ext.with_cuda())\n"
    result = subprocess.run([sys.executable, '-c', script],
                            capture_output=True,
                            text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() in ('ok True', 'ok False')


def test_op_benchmark_measures_without_openmmlab_packages(repo_root):
    """One measurement of tools/analysis_tools/benchmark_ops.py's worker (gpu_check's last
    step), with every OpenMMLab package blocked: its timing loop and ext bookkeeping must not
    pull mmengine in through ``mmlinear.apis``."""
    head, _ = SCRIPT.split('\nimport torch\n')
    script = head + textwrap.dedent('''
        import runpy
        tool = runpy.run_path(sys.argv[1])
        case = dict(op='linear_infsa_sums', impl='kernel', shape=[1, 2, 4], n=32,
                    device='cpu', dtype='float32', repeats=1, warmup=0)
        result = tool['run_worker'](case)
        assert result['fwd_s'] > 0 and result['fwd_bwd_s'] > 0, result
        loaded = [name for name in sys.modules if name.split('.')[0] in BLOCKED]
        assert not loaded, loaded
        print('ok')
    ''')
    tool = os.path.join(repo_root, 'tools', 'analysis_tools', 'benchmark_ops.py')
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [repo_root, os.getenv('PYTHONPATH')])))
    result = subprocess.run([sys.executable, '-c', script, tool],
                            capture_output=True,
                            text=True,
                            env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == 'ok'


def inner_pytest_args(config: pytest.Config) -> List[str]:
    """Options for a pytest started inside this one: the addopts this run uses.

    The inner run would otherwise read pytest.ini's addopts (``--timeout``, which needs
    pytest-timeout) even where the caller replaced them, as tools/gpu_check.sh does with
    ``-o addopts=-ra`` on an image without that plugin.
    """
    return ['-o', 'addopts=' + shlex.join(config.getini('addopts')), '-p', 'no:cacheprovider']


def test_op_tests_collect_without_openmmlab_packages(pytestconfig):
    """Every module of tests/test_ops imports without OpenMMLab, as the GPU check's bare image
    runs them (tests that need mmengine skip inside, never at import)."""
    head, _ = SCRIPT.split('\nimport torch\n')
    script = head + textwrap.dedent('''
        import json
        import pytest
        code = pytest.main(['--collect-only', '-q', *json.loads(sys.argv[2]), sys.argv[1]])
        loaded = [name for name in sys.modules if name.split('.')[0] in BLOCKED]
        assert not loaded, loaded
        sys.exit(int(code))
    ''')
    command = [
        sys.executable, '-c', script,
        os.path.dirname(__file__),
        json.dumps(inner_pytest_args(pytestconfig))
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r'\d+ tests collected', result.stdout), result.stdout[-3000:]


def test_op_tests_collect_without_pytest_timeout(repo_root, pytestconfig):
    """The collection check passes where pytest-timeout is missing and the caller overrides
    addopts (tools/gpu_check.sh on a bare image): plugin auto-loading is off here, so neither
    this pytest nor the one it starts knows ``--timeout``."""
    if not pytestconfig.pluginmanager.hasplugin('timeout'):
        # This run is that case already, and the check above ran in it; a second collection
        # would only lengthen gpu_check's time-bounded step.
        pytest.skip('pytest-timeout is not loaded: the collection check above ran without it')
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD='1')
    env.pop('PYTEST_ADDOPTS', None)
    command = [
        sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-o', 'addopts=-ra', '-q',
        f'{__file__}::test_op_tests_collect_without_openmmlab_packages'
    ]
    result = subprocess.run(
        command, cwd=repo_root, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert '1 passed' in result.stdout, result.stdout[-3000:]
