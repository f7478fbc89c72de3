# Shared by the launch scripts (sourced, not run): the argument check and the torchrun / srun
# command lines. Env: PYTHON (python); torchrun: NNODES (1), NODE_RANK (0), PORT (29500),
# MASTER_ADDR (127.0.0.1); srun: GPUS (8), GPUS_PER_NODE (8), CPUS_PER_TASK (5), SRUN_ARGS.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

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
