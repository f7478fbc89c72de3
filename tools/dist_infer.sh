#!/usr/bin/env bash
# Usage: [GRACE_SECONDS=600 NNODES=1 NODE_RANK=0 PORT=29500 MASTER_ADDR=127.0.0.1 PYTHON=python] \
#        tools/dist_infer.sh INPUTS CONFIG CHECKPOINT OUT NUM_PROCS [large_image.py options...]
# tools/inference/large_image.py over many images (INPUTS: a folder, with --pattern among the
# options, or a list file) in NUM_PROCS processes per node, launched by torchrun: one per GPU,
# or CPU processes (gloo) where there is no CUDA. The processes share the images by pixels,
# each image is done once, and OUT/manifest.jsonl is merged at the end.
#
# Signals: SIGTERM or SIGUSR1 to this script goes to torchrun, which passes it on to every
# worker and gives them GRACE_SECONDS to finish the image in progress before it kills them
# (choose it larger than the slowest image takes). torchrun then exits with a status of its
# own; this script exits 75, the requeue status of slurm_infer.sh and preemptible training,
# when every worker stopped after its image (rank 0 merged the manifest after the signal, with
# images pending), and the same command goes on with them.
set -euo pipefail
source "$(dirname "$0")/launch_common.sh"
require_args 5 "$0 INPUTS CONFIG CHECKPOINT OUT NUM_PROCS [large_image.py options...]" "$@"
INPUTS=$1
CONFIG=$2
CHECKPOINT=$3
OUT=$4
NPROCS=$5
shift 5
GRACE_SECONDS=${GRACE_SECONDS:-600}
check_seconds GRACE_SECONDS
# In the background (torchrun_tool's exec makes $! torchrun itself), so that this shell can
# pass on the signals. torchrun handles SIGUSR1 too only when asked.
torchrun_tool inference/large_image.py "$NPROCS" \
    --signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 \
    --shutdown-timeout="$GRACE_SECONDS" -- \
    "$INPUTS" "$CONFIG" "$CHECKPOINT" --out="$OUT" --launcher=pytorch "$@" &
wait_passing_signals $!
if [[ -n $SIGNALLED && $STATUS -ne 0 ]] && PYTHONPATH="$ROOT:${PYTHONPATH:-}" \
        "${PYTHON:-python}" -c 'import sys
from mmlinear.apis.run_manifest import stopped_on_signal
sys.exit(0 if stopped_on_signal(sys.argv[1], float(sys.argv[2])) else 1)' "$OUT" "$SIGNAL_TIME"; then
    STATUS=$REQUEUE_STATUS
fi
requeue_on_stop "inference stopped"
