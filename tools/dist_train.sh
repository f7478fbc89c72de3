#!/usr/bin/env bash
# Usage: tools/dist_train.sh CONFIG NUM_PROCS [train.py args...]
# Multi-process training with torchrun. Env: NNODES (1), NODE_RANK (0), PORT (29500),
# MASTER_ADDR (127.0.0.1), PYTHON (python). Without CUDA the processes use gloo on the CPU.
set -euo pipefail
if [[ $# -lt 2 ]]; then
    echo "usage: $0 CONFIG NUM_PROCS [train.py args...]" >&2
    exit 2
fi
CONFIG=$1
NPROCS=$2
shift 2
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHONPATH="$ROOT:${PYTHONPATH:-}" exec "${PYTHON:-python}" -m torch.distributed.run \
    --nnodes="${NNODES:-1}" --node_rank="${NODE_RANK:-0}" \
    --master_addr="${MASTER_ADDR:-127.0.0.1}" --master_port="${PORT:-29500}" \
    --nproc_per_node="$NPROCS" \
    "$ROOT/tools/train.py" "$CONFIG" --launcher pytorch "$@"
