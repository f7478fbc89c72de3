#!/usr/bin/env bash
# Usage: [GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 SIGNAL_SECONDS=120 SRUN_ARGS=...] \
#        tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [train.py args...]
# One task per GPU (or per process on CPU-only nodes), launched by srun.
#
# Preemption and time limits: slurm sends the tasks SIGUSR1 SIGNAL_SECONDS before the job's
# time limit (srun --signal=USR1@SIGNAL_SECONDS) and SIGTERM when it preempts the job; the
# tasks run with --preemptible, so they checkpoint after the current iteration and exit with
# status 75. Inside a batch job (sbatch --requeue; see docs/long_runs.md) the script then
# requeues the job with scontrol, and every start resumes (--resume) from the newest readable
# checkpoint in WORK_DIR. The batch shell's own warning (sbatch --signal=B:USR1@SECONDS) is
# passed on to the tasks.
set -euo pipefail
source "$(dirname "$0")/launch_common.sh"
require_args 4 "$0 PARTITION JOB_NAME CONFIG WORK_DIR [train.py args...]" "$@"
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
shift 4
SIGNAL_SECONDS=${SIGNAL_SECONDS:-120}
REQUEUE_STATUS=75  # mmlinear.engine.hooks.REQUEUE_EXIT_CODE
if ! [[ $SIGNAL_SECONDS =~ ^[0-9]+$ ]] || [[ $SIGNAL_SECONDS -gt 65535 ]]; then
    echo "SIGNAL_SECONDS must be a whole number of seconds, 0-65535, got '$SIGNAL_SECONDS'" >&2
    exit 2
fi
# In the background (srun_tool's exec makes $! srun itself), so that this shell can pass on
# the signals below.
srun_tool "$PARTITION" "$JOB_NAME" --signal=USR1@"$SIGNAL_SECONDS" -- train.py "$CONFIG" \
    --work-dir="$WORK_DIR" --launcher=slurm --preemptible --resume "$@" &
SRUN_PID=$!
# srun passes SIGUSR1 and SIGTERM on to every task; a trap lets this shell stay alive to do so.
trap 'kill -USR1 "$SRUN_PID" 2>/dev/null || true' USR1
trap 'kill -TERM "$SRUN_PID" 2>/dev/null || true' TERM
STATUS=0
while true; do
    # wait returns early (status > 128) when a trapped signal arrives; wait again then.
    wait "$SRUN_PID" && STATUS=0 || STATUS=$?
    kill -0 "$SRUN_PID" 2>/dev/null || break
done
if [[ $STATUS -eq $REQUEUE_STATUS ]]; then
    if [[ -n ${SLURM_JOB_ID:-} ]] && \
            [[ $(scontrol show job "$SLURM_JOB_ID" 2>/dev/null) == *BatchFlag=1* ]]; then
        echo "training checkpointed on a signal: requeueing job $SLURM_JOB_ID" >&2
        scontrol requeue "$SLURM_JOB_ID"
    else
        echo "training checkpointed on a signal (status $STATUS): run the same command again" \
            "to resume" >&2
    fi
fi
exit "$STATUS"
