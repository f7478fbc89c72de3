#!/usr/bin/env bash
# Usage: tools/dist_test.sh CONFIG CHECKPOINT NUM_PROCS [test.py args...]
# Multi-process evaluation with torchrun. Env: NNODES (1), NODE_RANK (0), PORT (29500),
# MASTER_ADDR (127.0.0.1), PYTHON (python). Without CUDA the processes use gloo on the CPU.
set -euo pipefail
if [[ $# -lt 3 ]]; then
    echo "usage: $0 CONFIG CHECKPOINT NUM_PROCS [test.py args...]" >&2
    exit 2
fi
CONFIG=$1
CHECKPOINT=$2
NPROCS=$3
shift 3
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHONPATH="$ROOT:${PYTHONPATH:-}" exec "${PYTHON:-python}" -m torch.distributed.run \
    --nnodes="${NNODES:-1}" --node_rank="${NODE_RANK:-0}" \
    --master_addr="${MASTER_ADDR:-127.0.0.1}" --master_port="${PORT:-29500}" \
    --nproc_per_node="$NPROCS" \
    "$ROOT/tools/test.py" "$CONFIG" "$CHECKPOINT" --launcher pytorch "$@"
