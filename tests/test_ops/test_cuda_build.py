"""Compile-only check of the CUDA kernels (no GPU needed, nvcc is).

Slow: the full CUDA build of mmlinear._ext takes about 6 minutes on 2 cores (see
docs/ops.md), so `.ci/run` runs it after the suite; `make check-cuda-build` runs the same
build.
"""
import os
import shutil
import subprocess
import sys

import pytest


def cuda_home() -> str:
    return os.environ.get('CUDA_HOME') or '/usr/local/cuda'


@pytest.mark.slow
@pytest.mark.skipif(
    not os.path.exists(os.path.join(cuda_home(), 'bin', 'nvcc')) and shutil.which('nvcc') is None,
    reason='needs nvcc (set CUDA_HOME to a CUDA toolkit)')
def test_cuda_sources_compile_and_load(repo_root, tmp_path):
    env = {
        **os.environ, 'CUDA_HOME': cuda_home(),
        'FORCE_CUDA': '1',
        'TORCH_CUDA_ARCH_LIST': os.environ.get('TORCH_CUDA_ARCH_LIST', '9.0'),
        'MMLINEAR_WITH_OPS': '1'
    }
    result = subprocess.run([
        sys.executable, 'setup.py', '-q', 'build_ext', '--build-temp',
        str(tmp_path / 'temp'), '--build-lib',
        str(tmp_path / 'lib')
    ],
                            cwd=repo_root,
                            env=env,
                            capture_output=True,
                            text=True,
                            timeout=3600)
    assert result.returncode == 0, result.stderr[-4000:]
    (library, ) = (tmp_path / 'lib' / 'mmlinear').glob('_ext.*.so')
    # The CUDA build links libcudart; with a CUDA build of torch it loads without a GPU, and
    # its CPU kernels still serve CPU tensors. A fresh process keeps the in-tree build loaded
    # here apart from this one.
    code = ('import importlib.util, sys, torch; '
            f'spec = importlib.util.spec_from_file_location("mmlinear._ext", {str(library)!r}); '
            'ext = importlib.util.module_from_spec(spec); spec.loader.exec_module(ext); '
            'q = torch.randn(1, 2, 5, 4); '
            'pooled = ext.linear_infsa_query_sums_forward(q, None)[0]; '
            'print(ext.with_cuda(), tuple(pooled.shape))')
    loaded = subprocess.run([sys.executable, '-c', code],
                            capture_output=True,
                            text=True,
                            timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-4000:]
    assert loaded.stdout.split('\n')[-2] == 'True (1, 2, 4)'
