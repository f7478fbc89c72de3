"""Build script for mmlinear.

The compiled ops (``mmlinear._ext``) are built from ``mmlinear/ops/csrc`` when those sources
exist: always a CPU ``CppExtension``; a ``CUDAExtension`` when CUDA is usable or
``FORCE_CUDA=1``. ``MMLINEAR_WITH_OPS=0`` builds no extension (the ops then fall back to their
PyTorch references). Install with ``pip install --no-build-isolation -e .`` after torch.
"""
import glob
import os
from setuptools import find_packages, setup

ROOT = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join('mmlinear', 'ops', 'csrc')


def read_version() -> str:
    namespace: dict = {}
    with open(os.path.join(ROOT, 'mmlinear', 'version.py')) as f:
        exec(f.read(), namespace)
    return namespace['__version__']


def read_requirements(name: str) -> list:
    path = os.path.join(ROOT, 'requirements', name)
    with open(path) as f:
        lines = (line.split('#')[0].strip() for line in f)
        return [line for line in lines if line]


def make_extensions() -> tuple:
    """Return ``(ext_modules, cmdclass)`` for ``mmlinear._ext``."""
    if os.getenv('MMLINEAR_WITH_OPS', '1') == '0':
        return [], {}
    cpp_sources = sorted(
        glob.glob(os.path.join(CSRC, 'pytorch', '*.cpp')) +
        glob.glob(os.path.join(CSRC, 'pytorch', 'cpu', '*.cpp')))
    if not cpp_sources:
        return [], {}
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
    include_dirs = [os.path.abspath(os.path.join(CSRC, 'common'))]
    # No -std flag: torch's helpers pick the standard its headers need (C++20 for torch 2.14).
    # -fopenmp: at::parallel_for is an inline `#pragma omp parallel` in ATen's headers (torch
    # is built with the OpenMP backend); without the flag the pragma is dropped and every CPU
    # kernel runs on one thread. The OpenMP runtime is the libgomp torch has already loaded.
    extra_compile_args = {'cxx': ['-O3', '-fopenmp']}
    extra_link_args = ['-fopenmp']
    use_cuda = os.getenv('FORCE_CUDA', '0') == '1' or torch.cuda.is_available()
    if use_cuda:
        sources = cpp_sources + sorted(
            glob.glob(os.path.join(CSRC, 'pytorch', 'cuda', '*.cpp')) +
            glob.glob(os.path.join(CSRC, 'pytorch', 'cuda', '*.cu')))
        extra_compile_args['nvcc'] = ['-O3', '--use_fast_math']
        ext = CUDAExtension(
            'mmlinear._ext',
            sources,
            include_dirs=include_dirs,
            define_macros=[('MMLINEAR_WITH_CUDA', None)],
            extra_compile_args=extra_compile_args,
            extra_link_args=extra_link_args)
    else:
        ext = CppExtension(
            'mmlinear._ext',
            cpp_sources,
            include_dirs=include_dirs,
            extra_compile_args=extra_compile_args,
            extra_link_args=extra_link_args)
    return [ext], {'build_ext': BuildExtension}


ext_modules, cmdclass = make_extensions()

setup(
    name='mmlinear',
    version=read_version(),
    description='Linear-complexity vision backbones (InfViT, WeightFormer, VECA) '
    'for mmpretrain, mmdet and mmseg',
    long_description=open(os.path.join(ROOT, 'README.md')).read() if os.path.exists(
        os.path.join(ROOT, 'README.md')) else '',
    long_description_content_type='text/markdown',
    license='Apache License 2.0',
    python_requires='>=3.10',
    packages=find_packages(include=['mmlinear', 'mmlinear.*']),
    # The configs ship inside the package (as OpenMMLab wheels ship .mim/configs) so that
    # downstream projects can inherit them as 'mmlinear::<path>'; with the model zoo's
    # metafiles and the tools, mim finds and runs them (`mim search / train / test mmlinear`).
    package_data={
        'mmlinear': [
            '.mim/model-index.yml', '.mim/configs/**/*.py', '.mim/configs/**/metafile.yml',
            '.mim/configs/**/README.md', '.mim/tools/**/*.py', '.mim/tools/**/*.sh'
        ]
    },
    include_package_data=True,
    # The pinned OpenMMLab stack; the onedl one (requirements/stack-onedl.txt) provides the same
    # modules under other distribution names, so an environment of it installs mmlinear
    # with --no-deps (as tools/misc/setup_env.sh does).
    install_requires=read_requirements('stack-pinned.txt') + read_requirements('runtime.txt'),
    extras_require={
        'tests': read_requirements('tests.txt'),
        'optional': read_requirements('optional.txt'),
        'deploy': read_requirements('deploy.txt'),
    },
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    zip_safe=False,
)
