#!/usr/bin/env bash
# Usage: [GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 SIGNAL_SECONDS=120 SRUN_ARGS=...] \
#        tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [train.py args...]
# One task per GPU (or per process on CPU-only nodes), launched by srun.
#
# Preemption and time limits: slurm sends the tasks SIGUSR1 SIGNAL_SECONDS before the job's
# time limit (srun --signal=USR1@SIGNAL_SECONDS); a SIGUSR1 or SIGTERM to this script (the
# batch shell's own warning, sbatch --signal=B:USR1@SECONDS, where the job script execs this
# one) is passed on to the tasks as SIGUSR1. The tasks run with --preemptible, so they
# checkpoint after the current iteration and exit with status 75. Inside a batch job (sbatch
# --requeue; see docs/long_runs.md) the script then requeues the job with scontrol, and every
# start resumes (--resume) from the newest readable checkpoint in WORK_DIR. A SIGTERM slurm
# sends to the whole job (scancel, preemption) reaches srun too, which kills the tasks at once.
set -euo pipefail
source "$(dirname "$0")/launch_common.sh"
require_args 4 "$0 PARTITION JOB_NAME CONFIG WORK_DIR [train.py args...]" "$@"
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
shift 4
srun_requeueing "$PARTITION" "$JOB_NAME" "training checkpointed" -- train.py "$CONFIG" \
    --work-dir="$WORK_DIR" --launcher=slurm --preemptible --resume "$@"
