#!/usr/bin/env bash
# Usage: tools/dist_test.sh CONFIG CHECKPOINT NUM_PROCS [test.py args...]
# Multi-process evaluation with torchrun. Env: NNODES (1), NODE_RANK (0), PORT (29500),
# MASTER_ADDR (127.0.0.1), PYTHON (python). Without CUDA the processes use gloo on the CPU.
set -euo pipefail
source "$(dirname "$0")/launch_common.sh"
require_args 3 "$0 CONFIG CHECKPOINT NUM_PROCS [test.py args...]" "$@"
CONFIG=$1
CHECKPOINT=$2
NPROCS=$3
shift 3
torchrun_tool test.py "$NPROCS" -- "$CONFIG" "$CHECKPOINT" --launcher pytorch "$@"
