#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment with one of its OpenMMLab stacks.
#
# Idempotent: a stamp keyed by the stack, the requirement files and this script makes a second
# run return in seconds. Both stacks' mmcv (2.1.0, and onedl-mmcv 2.3.6) exist on PyPI only as
# source releases and hard-code -std=c++17, which the torch 2.14 headers refuse, so mmcv is
# built once from the PyPI sdist with C++20 and the wheel is cached outside the repository
# (keyed by Python, torch and CUDA), because pip does not cache wheels it builds from a local
# folder.
#
# Environment:
#   STACK           the OpenMMLab stack (requirements/stack-$STACK.txt): pinned (the default:
#                   mmengine 0.10.7, mmcv 2.1.0, mmdet 3.3.0, mmseg 1.2.2, mmpretrain 1.2.0)
#                   or onedl (the maintained onedl-* continuation)
#   VENV            where to create the environment (default: .venv in the repo root for the
#                   pinned stack, .venv-onedl for onedl)
#   PYTHON          the base interpreter (default: python3.11, else python3)
#   MMLINEAR_CACHE  where built wheels are kept (default: ~/.cache/mmlinear)
#   MAX_JOBS        parallel compile jobs for mmcv and mmlinear._ext (default: 2)
#   MMLINEAR_WITH_OPS  0: build no mmlinear._ext (and remove an in-tree one); the ops then
#                   run their PyTorch references
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"

STACK="${STACK:-pinned}"
stack_file="requirements/stack-$STACK.txt"
if [[ ! -f "$stack_file" ]]; then
    stacks="$(cd requirements && ls stack-*.txt | sed 's/^stack-//; s/\.txt$//' | paste -sd,)"
    echo "setup_env.sh: unknown STACK='$STACK'; choose one of: ${stacks//,/, }" >&2
    exit 2
fi
default_venv=.venv
[[ "$STACK" == pinned ]] || default_venv=".venv-$STACK"
VENV="${VENV:-$default_venv}"
# Absolute: the mmcv build runs from its unpacked source folder.
[[ "$VENV" == /* ]] || VENV="$repo_root/$VENV"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
CACHE="${MMLINEAR_CACHE:-$HOME/.cache/mmlinear}"
export MAX_JOBS="${MAX_JOBS:-2}"
# torch guesses CUDA_HOME from the nvcc on PATH (/usr/local/bin/nvcc -> /usr/local), which breaks
# linking against libcudart; point it at the toolkit when one is installed.
if [[ -z "${CUDA_HOME:-}" && -d /usr/local/cuda ]]; then
    export CUDA_HOME=/usr/local/cuda
fi

log() { printf '[setup %(%H:%M:%S)T] %s\n' -1 "$*"; }

py="$VENV/bin/python"

# mmlinear._ext is built in place, outside the stamp: ninja recompiles only the csrc files that
# changed (seconds when none did), so an edited kernel is rebuilt by the next `make test`.
build_ops() {
    if [[ "${MMLINEAR_WITH_OPS:-1}" == 0 ]]; then
        rm -f mmlinear/_ext.*.so
        log "MMLINEAR_WITH_OPS=0: no compiled ops, the PyTorch references run"
        return
    fi
    log "compiled ops mmlinear._ext (incremental)"
    "$py" setup.py -q build_ext --inplace
}

stamp_inputs=(requirements/*.txt setup.py tools/misc/setup_env.sh)
stamp_hash="$( (echo "$STACK"; cat "${stamp_inputs[@]}") 2>/dev/null | sha256sum | cut -c1-16)"
stamp="$VENV/.mmlinear-setup-$stamp_hash"
if [[ -f "$stamp" ]]; then
    log "environment up to date ($VENV)"
    build_ops
    exit 0
fi

start=$SECONDS

# A machine that already has a CUDA-enabled torch (the GPU machine) keeps it: the venv then
# sees the base interpreter's packages instead of downloading the pinned CPU-capable build.
reuse_system_torch=0
if "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    reuse_system_torch=1
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV from $PYTHON"
    if [[ $reuse_system_torch == 1 ]]; then
        "$PYTHON" -m venv --system-site-packages "$VENV"
    else
        "$PYTHON" -m venv "$VENV"
    fi
fi
# One constraints file for every pip call: torch depends on setuptools and would otherwise pull in a
# setuptools >= 82, which has no pkg_resources and breaks the mmcv build and mmengine's 'pkg::'
# config inheritance; the built mmcv must never be replaced by a resolver.
# The stack's mmengine and mmcv requirements (for example onedl-mmcv==2.3.6): the distribution
# name, and the version the built wheel and the installed module must have.
mmengine_req="$(grep -E '^([a-z]+-)?mmengine==' "$stack_file")"
mmcv_req="$(grep -E '^([a-z]+-)?mmcv==' "$stack_file")"
mmcv_dist="${mmcv_req%%==*}"
mmcv_version="${mmcv_req##*==}"
mmcv_wheel_glob="${mmcv_dist//-/_}-$mmcv_version-*.whl"
constraints="$VENV/mmlinear-constraints.txt"
{
    printf 'setuptools<82\n%s\n' "$mmcv_req"
    if [[ $reuse_system_torch == 0 ]]; then cat requirements/torch.txt; fi
} >"$constraints"
pip_install() { "$py" -m pip install --disable-pip-version-check -q -c "$constraints" "$@"; }

log "build tools"
pip_install -r requirements/build.txt

if [[ $reuse_system_torch == 1 ]]; then
    log "using the CUDA torch of $PYTHON"
else
    log "torch and torchvision"
    pip_install -r requirements/torch.txt
fi

log "$mmengine_req"
pip_install "$mmengine_req"

mmcv_key="$("$py" -c 'import sys, torch; print(f"cp{sys.version_info[0]}{sys.version_info[1]}-torch{torch.__version__}")')"
if [[ "${FORCE_CUDA:-0}" == 1 ]] || "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    mmcv_key="$mmcv_key-cuda${TORCH_CUDA_ARCH_LIST:-native}"
fi
mmcv_dir="$CACHE/wheels/$mmcv_key"
if "$py" -c "import mmcv, mmcv.ops, sys; sys.exit(0 if mmcv.__version__ == '$mmcv_version' else 1)" 2>/dev/null; then
    log "$mmcv_req with ops already installed"
else
    if ! compgen -G "$mmcv_dir/$mmcv_wheel_glob" >/dev/null; then
        log "building $mmcv_req from source with C++20 (one-off, about 10-20 minutes on 2 cores)"
        build_dir="$(mktemp -d)"
        trap 'rm -rf "$build_dir"' EXIT
        "$py" -m pip download --disable-pip-version-check -q -c "$constraints" --no-deps \
            --no-binary :all: --no-build-isolation "$mmcv_req" -d "$build_dir/sdist"
        mkdir "$build_dir/src"
        tar -xzf "$build_dir"/sdist/*.tar.gz -C "$build_dir/src"
        src=("$build_dir"/src/*/)
        sed -i 's/-std=c++17/-std=c++20/g' "${src[0]}setup.py"
        mkdir -p "$mmcv_dir"
        (cd "${src[0]}" && MMCV_WITH_OPS=1 "$py" -m pip wheel --disable-pip-version-check \
            --no-deps --no-build-isolation -w "$build_dir/dist" .)
        # Move into the cache only once complete, so an interrupted build is never reused.
        mv "$build_dir"/dist/$mmcv_wheel_glob "$mmcv_dir/"
    fi
    log "installing cached $mmcv_dist wheel from $mmcv_dir"
    pip_install --no-deps "$mmcv_dir"/$mmcv_wheel_glob
fi

log "OpenMMLab toolboxes and their undeclared extras"
pip_install -r "$stack_file" -r requirements/runtime.txt -r requirements/tests.txt \
    -r requirements/optional.txt -r requirements/deploy.txt -r requirements/lint.txt

log "mmlinear (editable)"
# The extension is built by build_ops below (in place, incrementally), not a second time here.
MMLINEAR_WITH_OPS=0 pip_install --no-build-isolation --no-deps -e .
build_ops

"$py" -c 'import mmengine, mmcv.ops, mmdet, mmseg, mmpretrain, mmlinear; print("stack '"$STACK"':", "mmengine", mmengine.__version__, "mmcv", mmcv.__version__, "mmdet", mmdet.__version__, "mmseg", mmseg.__version__, "mmpretrain", mmpretrain.__version__)'
rm -f "$VENV"/.mmlinear-setup-*
touch "$stamp"
log "done in $((SECONDS - start)) s"
