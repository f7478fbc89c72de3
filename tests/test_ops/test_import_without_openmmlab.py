"""``mmlinear.ops`` and ``mmlinear._ext`` need torch alone (a bare GPU image has no mmengine):
checked in a fresh interpreter in which every OpenMMLab package fails to import."""
import os
import re
import subprocess
import sys
import textwrap

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
    torch.testing.assert_close(ops.linear_infsa(q, q, q, rho),
                               ops.linear_infsa_reference(q, q, q, rho))
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


def test_op_tests_collect_without_openmmlab_packages():
    """Every module of tests/test_ops imports without OpenMMLab, as the GPU check's bare image
    runs them (tests that need mmengine skip inside, never at import)."""
    head, _ = SCRIPT.split('\nimport torch\n')
    script = head + textwrap.dedent('''
        import pytest
        code = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', sys.argv[1]])
        loaded = [name for name in sys.modules if name.split('.')[0] in BLOCKED]
        assert not loaded, loaded
        sys.exit(int(code))
    ''')
    result = subprocess.run(
        [sys.executable, '-c', script, os.path.dirname(__file__)],
        capture_output=True,
        text=True,
        timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r'\d+ tests collected', result.stdout), result.stdout[-3000:]
