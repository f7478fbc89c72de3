# Two commands on a fresh machine: `make demo` and `make test`. Each sets up what it needs
# (idempotently: a second set-up takes seconds) and then runs.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup data demo test test-all bench-relation clean

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

clean:
	rm -rf work_dirs
