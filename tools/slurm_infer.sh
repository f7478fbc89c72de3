#!/usr/bin/env bash
# Usage: [GPUS=8 GPUS_PER_NODE=8 CPUS_PER_TASK=5 SIGNAL_SECONDS=120 SRUN_ARGS=...] \
#        tools/slurm_infer.sh PARTITION JOB_NAME INPUTS CONFIG CHECKPOINT OUT \
#        [large_image.py options...]
# tools/inference/large_image.py over many images (INPUTS: a folder, with --pattern among the
# options, or a list file), one task per GPU (or per process on CPU-only nodes), launched by
# srun on one or several nodes. The tasks share the images by pixels, each image is done once,
# each task writes its images' folders under OUT, and OUT/manifest.jsonl is merged at the end.
#
# Preemption and time limits: slurm sends the tasks SIGUSR1 SIGNAL_SECONDS before the job's
# time limit (srun --signal=USR1@SIGNAL_SECONDS); a SIGUSR1 or SIGTERM to this script is passed
# on to the tasks as SIGUSR1. Each task finishes the image in progress and exits with status
# 75. Inside a batch job (sbatch --requeue) the script then requeues the job with scontrol,
# and every start skips the images whose outputs are complete. A SIGTERM slurm sends to the
# whole job (scancel, preemption, the time limit itself) reaches srun too, which kills the
# tasks at once: only the images complete by then are kept (docs/large_images.md).
set -euo pipefail
source "$(dirname "$0")/launch_common.sh"
require_args 6 "$0 PARTITION JOB_NAME INPUTS CONFIG CHECKPOINT OUT [large_image.py options...]" \
    "$@"
PARTITION=$1
JOB_NAME=$2
INPUTS=$3
CONFIG=$4
CHECKPOINT=$5
OUT=$6
shift 6
srun_requeueing "$PARTITION" "$JOB_NAME" "inference stopped" -- inference/large_image.py \
    "$INPUTS" "$CONFIG" "$CHECKPOINT" --out="$OUT" --launcher=slurm "$@"
