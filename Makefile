# Two commands on a fresh machine: `make demo` and `make test`. Each sets up what it needs
# (idempotently: a second set-up takes seconds) and then runs.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup data demo test test-all bench-relation ops bench-ops check-cuda-build gpu-check clean

setup:
	@bash tools/misc/setup_env.sh

data: setup
	@$(PY) tools/misc/make_tiny_datasets.py

demo: data
	@$(PY) tools/misc/run_demo.py

test: setup
	@$(PY) -m pytest tests

# The opt-in heavier checks as well (marked `slow`).
test-all: setup
	@$(PY) -m pytest tests --run-slow

bench-relation: data
	@$(PY) tools/analysis_tools/benchmark_relation.py --data data/shapes/relation

# Rebuild mmlinear._ext in place (incremental; `make setup` does it too).
ops: setup

# Compiled kernels vs PyTorch references (time, peak memory, ratios); JSON + PNG in work_dirs.
bench-ops: setup
	@$(PY) tools/analysis_tools/benchmark_ops.py --device cpu --out work_dirs/benchmark_ops

# Compile the CUDA kernels without a GPU (nvcc, sm_90 by default) into build/cuda-check; the
# in-tree CPU build is left alone.
check-cuda-build: setup
	@rm -rf build/cuda-check
	@CUDA_HOME=$${CUDA_HOME:-/usr/local/cuda} FORCE_CUDA=1 \
		TORCH_CUDA_ARCH_LIST="$${TORCH_CUDA_ARCH_LIST:-9.0}" \
		$(PY) setup.py -q build_ext --build-temp build/cuda-check/temp \
		--build-lib build/cuda-check/lib

# On a CUDA machine: build with the CUDA kernels, run the op tests on CUDA, benchmark.
gpu-check:
	@bash tools/gpu_check.sh

clean:
	rm -rf work_dirs
