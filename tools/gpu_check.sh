#!/usr/bin/env bash
# One-command check of the CUDA kernels on a machine with a GPU and no internet (about 10
# minutes on an H200 with 16 cores: build 68 s, op tests 98 s, benchmark 31 fresh processes):
#   1. build mmlinear._ext in place with the CUDA kernels for the local GPU's architecture,
#   2. run the op tests (tests/test_ops), whose `device` fixture now includes CUDA,
#   3. run the op benchmark on CUDA (kernel vs reference: time, peak memory, ratios).
# Needs torch with CUDA, pytest, numpy, matplotlib, setuptools and nvcc (CUDA_HOME); ninja makes
# the build parallel. It needs no mmengine, mmcv or toolbox (`mmlinear.ops` imports with torch
# alone) and installs nothing.
#
# `tools/gpu_check.sh --rehearse` runs the same steps on a machine without a GPU (a CPU-only
# build, the op tests and a short CPU benchmark), so that an environment that has only torch,
# pytest, numpy and matplotlib can be checked before GPU time is spent on it.
#
# Environment:
#   PYTHON      interpreter (default: .venv/bin/python when present, else python3)
#   CUDA_HOME   CUDA toolkit (default: /usr/local/cuda when present)
#   TORCH_CUDA_ARCH_LIST  architectures to compile (default: the local GPU's, e.g. 9.0)
#   MAX_JOBS    parallel compile jobs (default: number of CPUs)
#   OUT         where the benchmark writes JSON + PNG (default: work_dirs/gpu_check)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
rehearse=0
case "${1:-}" in
    --rehearse) rehearse=1 ;;
    '') ;;
    *) echo "usage: $0 [--rehearse]" >&2; exit 2 ;;
esac
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
if [[ -z "${CUDA_HOME:-}" && -d /usr/local/cuda ]]; then export CUDA_HOME=/usr/local/cuda; fi
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"
export PYTHONPATH="$repo_root${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-work_dirs/gpu_check}"
log() { printf '[gpu_check %(%H:%M:%S)T] %s\n' -1 "$*"; }

# Fail in seconds, naming what is missing, rather than after minutes of GPU time.
REHEARSE=$rehearse "$PYTHON" - <<'PY'
import importlib.util, os, sys
missing = [m for m in ('torch', 'pytest', 'numpy', 'matplotlib', 'setuptools')
           if importlib.util.find_spec(m) is None]
if missing:
    sys.exit('gpu_check: missing Python packages: ' + ', '.join(missing))
import torch
import shutil
if shutil.which('ninja') is None:
    print('gpu_check: no ninja on PATH; the extension builds one file at a time')
if os.environ['REHEARSE'] == '1':
    print('gpu_check: rehearsal on the CPU with torch', torch.__version__)
elif not torch.cuda.is_available():
    sys.exit('gpu_check: torch sees no CUDA device (torch %s, CUDA %s)'
             % (torch.__version__, torch.version.cuda))
else:
    print('gpu_check: torch', torch.__version__, 'CUDA', torch.version.cuda, 'on',
          torch.cuda.get_device_name(0))
PY

if [[ $rehearse == 1 ]]; then
    device=cpu
    unset FORCE_CUDA
    bench_args=(--repeats 2 --warmup 1 --sizes 1024 4096)
    build_limit=1200  # a 2-core CPU build, without ninja one file at a time
else
    device=cuda
    export FORCE_CUDA=1
    bench_args=(--repeats 10 --warmup 3)
    build_limit=300
    if [[ -z "${TORCH_CUDA_ARCH_LIST:-}" ]]; then
        TORCH_CUDA_ARCH_LIST="$("$PYTHON" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0))')"
        export TORCH_CUDA_ARCH_LIST
    fi
fi

start=$SECONDS
log "1/3 building mmlinear._ext for $device ($MAX_JOBS jobs)"
timeout "$build_limit" "$PYTHON" setup.py -q build_ext --inplace
"$PYTHON" -c "import mmlinear._ext as ext, sys; sys.exit(0 if '$device' == 'cpu' or ext.with_cuda() else 'gpu_check: the extension was built without CUDA')"
log "built in $((SECONDS - start)) s"

log "2/3 op tests"
# The repository's pytest.ini asks for pytest-timeout; the plain pytest of a bare image has no
# such option, and `timeout` bounds the step instead. The pytest that
# test_import_without_openmmlab.py starts inside takes the same override.
timeout 300 "$PYTHON" -m pytest -p no:cacheprovider -o addopts=-ra -q tests/test_ops

log "3/3 op benchmark on $device"
timeout 480 "$PYTHON" tools/analysis_tools/benchmark_ops.py --device "$device" "${bench_args[@]}" \
    --out "$OUT"
log "done in $((SECONDS - start)) s"
