# Two commands on a fresh machine: `make demo` and `make test`. Each sets up what it needs
# (idempotently: a second set-up takes seconds) and then runs.
# The OpenMMLab stack (requirements/stack-$(STACK).txt): pinned (mmengine 0.10.7, mmcv 2.1.0,
# mmdet 3.3.0, mmseg 1.2.2, mmpretrain 1.2.0) or onedl (the maintained onedl-* continuation), each
# in its own environment: `make test STACK=onedl` builds .venv-onedl beside .venv and runs there.
STACK ?= pinned
ifeq ($(STACK),pinned)
VENV ?= .venv
else
VENV ?= .venv-$(STACK)
endif
PY := $(VENV)/bin/python
export STACK VENV

.PHONY: setup data demo demo-large test test-all lint format bench-relation ops bench-ops \
	check-cuda-build gpu-check clean reproduce-demo

setup:
	@bash tools/misc/setup_env.sh

data: setup
	@$(PY) tools/misc/make_tiny_datasets.py

demo: data
	@$(PY) tools/misc/run_demo.py

# Two generated LARGE_SCENE x LARGE_SCENE 4-channel 16-bit GeoTIFF scenes, each segmented by the
# demo UperNet whole (streamed) and with mmseg's slide mode: time, peak memory, mIoU and a
# picture in work_dirs/demo_large/<kind>/. The mosaic is of independent 128 x 128 scenes; the
# continuous scene's shapes lie anywhere, across the borders of slide mode's tiles. The UperNet
# is the one `make demo` trains; when it is missing, run_demo.py trains it (and the classifier
# it starts from, if that is missing too). Its head pools windows of the training size (the
# config's context_window=8, docs/large_images.md). DEMO_LARGE_OPTIONS is passed on to both
# runs, e.g. DEMO_LARGE_OPTIONS='--cfg-options model.decode_head.context_window=whole' (the
# pyramid pooling over the whole image, as mmseg's UPerHead).
LARGE_SCENE ?= 4096
DEMO_LARGE_OPTIONS ?=
DEMO_SEG := work_dirs/demo/upernet_infvit-demo-linear_shapes-ade

$(DEMO_SEG)/last_checkpoint: | data
	@$(PY) tools/misc/run_demo.py --only upernet_infvit-demo-linear_shapes-ade

demo-large: setup $(DEMO_SEG)/last_checkpoint
	@for kind in mosaic continuous; do \
		prefix=$$([ $$kind = mosaic ] || echo $${kind}_); \
		echo "== $$kind scene, $(LARGE_SCENE) x $(LARGE_SCENE) =="; \
		$(PY) tools/misc/make_tiny_datasets.py --large-scene $(LARGE_SCENE) \
			--large-scene-kind $$kind || exit 1; \
		$(PY) tools/misc/demo_large_image.py data/shapes_large/$${prefix}scene_$(LARGE_SCENE).tif \
			data/shapes_large/$${prefix}labels_$(LARGE_SCENE).tif \
			--checkpoint $$(cat $(DEMO_SEG)/last_checkpoint) \
			--work-dir work_dirs/demo_large/$$kind $(DEMO_LARGE_OPTIONS) || exit 1; \
	done

# The suite runs in TEST_JOBS processes (pytest-xdist; 1 runs it in this process).
TEST_JOBS ?= 2

test: setup
	@$(PY) -m pytest -n $(TEST_JOBS) tests

# The opt-in heavier checks as well (marked `slow`).
test-all: setup
	@$(PY) -m pytest -n $(TEST_JOBS) tests --run-slow

# Style (setup.cfg): flake8, import order (isort) and formatting (yapf); `make format` fixes
# the last two in place.
LINT_PATHS := mmlinear tools demo tests configs setup.py

lint: setup
	@$(PY) -m flake8 $(LINT_PATHS)
	@$(PY) -m isort --check-only --diff $(LINT_PATHS)
	@$(PY) -m yapf --recursive --diff $(LINT_PATHS)

format: setup
	@$(PY) -m isort $(LINT_PATHS)
	@$(PY) -m yapf --recursive --in-place $(LINT_PATHS)

# Every experiment of the three papers that runs at demo scale (tools/reproduce.py --list),
# each making the data and checkpoints it reads: trainings of a few minutes each on 2 cores.
reproduce-demo: data
	@$(PY) tools/reproduce.py --all

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

# Benchmarks of docs/benchmarks.md (CPU, about 25 minutes on an idle 2-core machine): speed
# and memory vs resolution, the 9216 x 9216 Linear-InfViT-4L inference, FLOPs, attention maps
# and attention quality (the last two use the classifier that `make demo` trains).
BENCH_OUT ?= work_dirs/bench
BENCH_MODELS := infvit-4l-linear infvit-4l-pure infvit-4l-softmax vit-4l-sdpa weightformer-t \
	deit-t-sdpa veca-small
DEMO_CLS := work_dirs/demo/infvit-demo-linear_shapes-cls
VECA_ELASTIC := configs/demo/veca-demo-elastic_shapes-cls.py
VECA_ELASTIC_DIR := work_dirs/demo/veca-demo-elastic_shapes-cls

.PHONY: bench bench-scaling bench-9216 bench-streamed bench-flops bench-attention bench-elastic \
	docs-figures

bench: bench-flops bench-scaling bench-9216 bench-elastic bench-attention

bench-scaling: setup
	@$(PY) tools/analysis_tools/benchmark.py --models $(BENCH_MODELS) \
		--resolutions 224 448 896 1344 1792 2688 4096 --time-budget 45 --mem-limit-gb 16 \
		--threads 2 --out $(BENCH_OUT)/scaling

bench-9216: setup
	@$(PY) tools/analysis_tools/benchmark.py --models infvit-4l-linear --resolutions 9216 \
		--dtypes fp32 bf16 --warmup 0 --repeats 1 --time-budget 3600 --worker-timeout 3000 --mem-limit-gb 22 \
		--threads 2 --out $(BENCH_OUT)/linear_9216

# Whole-image against streamed forward (Backbone.forward_streamed) with the memory model's
# prediction beside each measured peak; 16384 x 16384 streams only (the whole forward exceeds
# 24 GB). Hours on 2 cores: run the resolutions you need with BENCH_STREAMED_RES.
BENCH_STREAMED_RES ?= 2048 4096 9216 16384
bench-streamed: setup
	@$(PY) tools/analysis_tools/benchmark.py --models infvit-4l-linear weightformer-s veca-small \
		--resolutions $(BENCH_STREAMED_RES) --dtypes fp32 bf16 --modes forward streamed \
		--warmup 0 --repeats 1 --time-budget 3600 --worker-timeout 3000 --mem-limit-gb 22 \
		--threads 2 --out $(BENCH_OUT)/streamed

bench-flops: setup
	@$(PY) tools/analysis_tools/get_flops.py --models $(BENCH_MODELS) \
		--resolutions 224 512 1024 1248 2048 4096 9216 --out $(BENCH_OUT)/flops.md

bench-attention: data bench-elastic
	@test -f $(DEMO_CLS)/last_checkpoint || { echo 'run make demo first: it trains the classifier used here'; exit 1; }
	@$(PY) tools/analysis_tools/visualize_attention.py \
		--models configs/demo/infvit-demo-linear_shapes-cls.py infvit-demo-pure \
		infvit-demo-softmax weightformer-test $(VECA_ELASTIC) \
		--checkpoints $$(cat $(DEMO_CLS)/last_checkpoint) none none none \
		$$(cat $(VECA_ELASTIC_DIR)/last_checkpoint) \
		--images data/shapes/coco/images/val --max-images 3 --img-size 64 \
		--out $(BENCH_OUT)/attention_maps.png
	@$(PY) tools/analysis_tools/eval_attention_quality.py \
		configs/demo/infvit-demo-linear_shapes-cls.py --checkpoint $$(cat $(DEMO_CLS)/last_checkpoint) \
		--images data/shapes/coco/images/val --boxes data/shapes/coco/annotations/instances_val.json \
		--img-size 64 --out $(BENCH_OUT)/quality_trained
	@$(PY) tools/analysis_tools/eval_attention_quality.py \
		configs/demo/infvit-demo-linear_shapes-cls.py \
		--images data/shapes/coco/images/val --boxes data/shapes/coco/annotations/instances_val.json \
		--img-size 64 --out $(BENCH_OUT)/quality_random

# VECA's nested budgets: train the elastic demo classifier once (a few minutes), then top-1 on
# the bundled validation set and latency at 256 px for every core budget, with a plot.
$(VECA_ELASTIC_DIR)/last_checkpoint: | data
	@$(PY) tools/train.py $(VECA_ELASTIC) --work-dir $(VECA_ELASTIC_DIR)

bench-elastic: $(VECA_ELASTIC_DIR)/last_checkpoint
	@$(PY) tools/analysis_tools/elastic_sweep.py $(VECA_ELASTIC) \
		--checkpoint $$(cat $(VECA_ELASTIC_DIR)/last_checkpoint) --img-size 256 --threads 2 \
		--out $(BENCH_OUT)/elastic

# The pictures docs/ shows, copied from a finished `make bench` on purpose (the bench targets
# never write into docs/). Stops on the first picture that a bench target has not produced.
DOCS_FIGURES := scaling/scaling.png:benchmark_scaling_cpu.png attention_maps.png:attention_maps.png \
	quality_trained/curves.png:attention_quality_curves.png elastic/elastic_sweep.png:elastic_sweep.png

docs-figures:
	@for pair in $(DOCS_FIGURES); do \
		src=$(BENCH_OUT)/$${pair%%:*}; dst=docs/$${pair##*:}; \
		test -f $$src || { echo "$$src is missing: run the bench target that writes it first"; exit 1; }; \
		cp $$src $$dst && echo "$$src -> $$dst"; \
	done
