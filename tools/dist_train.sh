#!/usr/bin/env bash
# Usage: tools/dist_train.sh CONFIG NUM_PROCS [train.py args...]
# Multi-process training with torchrun. Env: NNODES (1), NODE_RANK (0), PORT (29500),
# MASTER_ADDR (127.0.0.1), PYTHON (python), MAX_RESTARTS (3). Without CUDA the processes use
# gloo on the CPU.
# Elastic restarts: when a worker dies, torchrun stops the others and starts the group again,
# up to MAX_RESTARTS times (0 switches it off); the restarted workers resume from the newest
# readable checkpoint in the work dir (tools/train.py reads TORCHELASTIC_RESTART_COUNT).
set -euo pipefail
source "$(dirname "$0")/launch_common.sh"
require_args 2 "$0 CONFIG NUM_PROCS [train.py args...]" "$@"
CONFIG=$1
NPROCS=$2
shift 2
MAX_RESTARTS=${MAX_RESTARTS:-3}
if ! [[ $MAX_RESTARTS =~ ^[0-9]+$ ]]; then
    echo "MAX_RESTARTS must be a whole number >= 0 (0: no restarts), got '$MAX_RESTARTS'" >&2
    exit 2
fi
torchrun_tool train.py "$NPROCS" --max_restarts="$MAX_RESTARTS" -- "$CONFIG" --launcher pytorch "$@"
