#!/usr/bin/env bash
# One-command check of the CUDA kernels on a machine with a GPU and no internet (< 8 minutes):
#   1. build mmlinear._ext in place with the CUDA kernels for the local GPU's architecture,
#   2. run the op tests (tests/test_ops), whose `device` fixture now includes CUDA,
#   3. run the op benchmark on CUDA (kernel vs reference: time, peak memory, ratios).
# Needs torch with CUDA, pytest, matplotlib and nvcc (CUDA_HOME); installs nothing.
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
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
if [[ -z "${CUDA_HOME:-}" && -d /usr/local/cuda ]]; then export CUDA_HOME=/usr/local/cuda; fi
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"
export FORCE_CUDA=1
export PYTHONPATH="$repo_root${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-work_dirs/gpu_check}"
log() { printf '[gpu_check %(%H:%M:%S)T] %s\n' -1 "$*"; }

"$PYTHON" - <<'PY'
import sys, torch
if not torch.cuda.is_available():
    sys.exit('gpu_check: torch sees no CUDA device (torch %s, CUDA %s)' % (torch.__version__, torch.version.cuda))
print('gpu_check: torch', torch.__version__, 'CUDA', torch.version.cuda, 'on',
      torch.cuda.get_device_name(0))
PY
if [[ -z "${TORCH_CUDA_ARCH_LIST:-}" ]]; then
    TORCH_CUDA_ARCH_LIST="$("$PYTHON" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0))')"
    export TORCH_CUDA_ARCH_LIST
fi

start=$SECONDS
log "1/3 building mmlinear._ext with CUDA (sm_${TORCH_CUDA_ARCH_LIST}, $MAX_JOBS jobs)"
timeout 300 "$PYTHON" setup.py -q build_ext --inplace
"$PYTHON" -c 'import mmlinear._ext as ext, sys; sys.exit(0 if ext.with_cuda() else "gpu_check: the extension was built without CUDA")'
log "built in $((SECONDS - start)) s"

log "2/3 op tests on CPU and CUDA"
timeout 150 "$PYTHON" -m pytest -p no:cacheprovider -q -rs tests/test_ops

log "3/3 op benchmark on CUDA"
timeout 150 "$PYTHON" tools/analysis_tools/benchmark_ops.py --device cuda --repeats 10 \
    --warmup 3 --out "$OUT"
log "done in $((SECONDS - start)) s"
