# Shared by the launch scripts (sourced, not run): the argument check and the torchrun / srun
# command lines. Env: PYTHON (python); torchrun: NNODES (1), NODE_RANK (0), PORT (29500),
# MASTER_ADDR (127.0.0.1); srun: GPUS (8), GPUS_PER_NODE (8), CPUS_PER_TASK (5), SRUN_ARGS.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQUEUE_STATUS=75  # mmlinear.engine.hooks.REQUEUE_EXIT_CODE

# require_args COUNT USAGE ARGS...: exit 2 with "usage: USAGE" unless ARGS has COUNT or more.
require_args() {
    local count=$1 usage=$2
    shift 2
    if [[ $# -lt $count ]]; then
        echo "usage: $usage" >&2
        exit 2
    fi
}

# split_at_dashes WORDS...: the words before the first `--` into the array OPTIONS, those after
# it into the array REST.
split_at_dashes() {
    OPTIONS=()
    while [[ $1 != -- ]]; do
        OPTIONS+=("$1")
        shift
    done
    shift
    REST=("$@")
}

# torchrun_tool TOOL NUM_PROCS [torchrun options...] -- [TOOL args...]: replaces the shell with
# torchrun running tools/TOOL in NUM_PROCS processes per node.
torchrun_tool() {
    local tool=$1 nprocs=$2
    shift 2
    split_at_dashes "$@"
    PYTHONPATH="$ROOT:${PYTHONPATH:-}" exec "${PYTHON:-python}" -m torch.distributed.run \
        --nnodes="${NNODES:-1}" --node_rank="${NODE_RANK:-0}" \
        --master_addr="${MASTER_ADDR:-127.0.0.1}" --master_port="${PORT:-29500}" \
        --nproc_per_node="$nprocs" "${OPTIONS[@]}" "$ROOT/tools/$tool" "${REST[@]}"
}

# srun_tool PARTITION JOB_NAME [srun options...] -- TOOL [TOOL args...]: replaces the shell with
# srun running tools/TOOL as GPUS tasks, GPUS_PER_NODE per node (one per GPU).
srun_tool() {
    local partition=$1 job_name=$2
    shift 2
    split_at_dashes "$@"
    # SRUN_ARGS is split into words on purpose: it holds any number of srun options.
    # shellcheck disable=SC2086
    PYTHONPATH="$ROOT:${PYTHONPATH:-}" exec srun -p "$partition" --job-name="$job_name" \
        --gres=gpu:"${GPUS_PER_NODE:-8}" --ntasks="${GPUS:-8}" \
        --ntasks-per-node="${GPUS_PER_NODE:-8}" --cpus-per-task="${CPUS_PER_TASK:-5}" \
        --kill-on-bad-exit=1 "${OPTIONS[@]}" ${SRUN_ARGS:-} \
        "${PYTHON:-python}" -u "$ROOT/tools/${REST[0]}" "${REST[@]:1}"
}

# pass_on SIGNAL: send SIGNAL to LAUNCHER_PID, recording it in SIGNALLED and the time of the
# first one (seconds since the epoch) in SIGNAL_TIME.
pass_on() {
    [[ -n $SIGNALLED ]] || SIGNAL_TIME=$(date +%s.%N)
    SIGNALLED=$1
    kill -"$1" "$LAUNCHER_PID" 2>/dev/null || true
}

# wait_passing_signals PID [TERM_AS]: wait for the launcher PID (started in the background),
# passing SIGUSR1 on to it and SIGTERM as TERM_AS (default TERM); the launcher passes them on to
# every task. Sets STATUS to its exit status, and SIGNALLED and SIGNAL_TIME as pass_on does
# (empty when no signal came).
wait_passing_signals() {
    LAUNCHER_PID=$1
    SIGNALLED=
    SIGNAL_TIME=
    # A trap lets this shell stay alive to pass the signal on.
    trap 'pass_on USR1' USR1
    trap "pass_on ${2:-TERM}" TERM
    STATUS=0
    while true; do
        # wait returns early (status > 128) when a trapped signal arrives; wait again then.
        wait "$LAUNCHER_PID" && STATUS=0 || STATUS=$?
        kill -0 "$LAUNCHER_PID" 2>/dev/null || break
    done
}

# requeue_on_stop WHAT: exit with STATUS; when it is the requeue status (75, a run stopped by
# SIGUSR1 or SIGTERM), first requeue the batch job (sbatch --requeue) or say to run the same
# command again, WHAT saying what happened ("training checkpointed").
requeue_on_stop() {
    local what=$1
    if [[ $STATUS -eq $REQUEUE_STATUS ]]; then
        if [[ -n ${SLURM_JOB_ID:-} ]] && \
                [[ $(scontrol show job "$SLURM_JOB_ID" 2>/dev/null) == *BatchFlag=1* ]]; then
            echo "$what on a signal: requeueing job $SLURM_JOB_ID" >&2
            scontrol requeue "$SLURM_JOB_ID"
        else
            echo "$what on a signal (status $STATUS): run the same command again" \
                "to go on" >&2
        fi
    fi
    exit "$STATUS"
}

# srun_requeueing PARTITION JOB_NAME WHAT [srun options] -- TOOL [tool args]: srun_tool with
# the warning --signal=USR1@SIGNAL_SECONDS (default 120; exit 2 unless 0-65535), in the
# background (srun_tool's exec makes $! srun itself) so that this shell can pass on the
# signals; then wait_passing_signals and requeue_on_stop WHAT.
srun_requeueing() {
    local partition=$1 job_name=$2 what=$3
    shift 3
    SIGNAL_SECONDS=${SIGNAL_SECONDS:-120}
    check_seconds SIGNAL_SECONDS 65535
    srun_tool "$partition" "$job_name" --signal=USR1@"$SIGNAL_SECONDS" "$@" &
    # srun answers a SIGTERM by killing the step's tasks ("srun: forcing job termination");
    # it passes SIGUSR1 on to them as it is, and the tasks stop on it as on SIGTERM.
    wait_passing_signals $! USR1
    requeue_on_stop "$what"
}

# check_seconds NAME [MAX]: exit 2 unless the variable NAME holds a whole number of seconds
# (at most MAX where given).
check_seconds() {
    local name=$1 max=${2:-} value=${!1}
    if ! [[ $value =~ ^[0-9]+$ ]] || [[ -n $max && $value -gt $max ]]; then
        echo "$name must be a whole number of seconds${max:+, 0-$max}, got '$value'" >&2
        exit 2
    fi
}
