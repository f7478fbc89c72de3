#!/usr/bin/env bash
# Usage: [GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 SRUN_ARGS=...] \
#        tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [test.py args...]
set -euo pipefail
source "$(dirname "$0")/launch_common.sh"
require_args 4 "$0 PARTITION JOB_NAME CONFIG CHECKPOINT [test.py args...]" "$@"
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
CHECKPOINT=$4
shift 4
srun_tool "$PARTITION" "$JOB_NAME" -- test.py "$CONFIG" "$CHECKPOINT" --launcher=slurm "$@"
