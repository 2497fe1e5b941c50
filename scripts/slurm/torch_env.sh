#!/usr/bin/env bash
# torch_env.sh — run one task of a PyTorch DDP job under srun with the variables torch.distributed
# and fastload.torch read, taken from Slurm's own:
#   RANK=SLURM_PROCID  WORLD_SIZE=SLURM_NTASKS  LOCAL_RANK=SLURM_LOCALID
#   LOCAL_WORLD_SIZE = this node's task count (SLURM_STEP_TASKS_PER_NODE, e.g. "4(x2)" or "4,2")
#   MASTER_ADDR = the address of the step's first node (its NodeAddr in Slurm, else its name)
#   MASTER_PORT = 20000 + SLURM_JOB_ID % 20000 unless already set (two steps of one job at the same
#                 time need their own: set MASTER_PORT)
# then execs the command. fastload.torch.Loader takes rank and world from torch.distributed once
# init_process_group("nccl" or "gloo") has run (env:// reads MASTER_ADDR/PORT, RANK, WORLD_SIZE), so
# each rank reads its own share of every epoch.
#
#   srun -n 8 --ntasks-per-node 4 scripts/slurm/torch_env.sh python3 train.py ...
#
# No --mpi needed: the processes meet over TCP at MASTER_ADDR:MASTER_PORT (torch's rendezvous), not
# over PMI. Variables already set by the caller are kept, except that RANK/WORLD_SIZE/LOCAL_RANK
# always follow Slurm's (a stale RANK inherited from a login shell would give two rank 0s).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "torch_env.sh: usage: srun ... torch_env.sh COMMAND [ARGS]" >&2; exit 2; }
: "${SLURM_PROCID:?torch_env.sh: not inside an srun step (SLURM_PROCID unset)}"
export RANK=$SLURM_PROCID WORLD_SIZE=${SLURM_NTASKS:?} LOCAL_RANK=${SLURM_LOCALID:-0}
# this node's task count: SLURM_STEP_TASKS_PER_NODE lists per-node counts as "a(xk),b,...";
# this node is entry SLURM_NODEID of that list once expanded
lws=""
if [[ -n ${SLURM_STEP_TASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-}} ]]; then
    IFS=, read -ra groups <<<"${SLURM_STEP_TASKS_PER_NODE:-$SLURM_TASKS_PER_NODE}"
    node=0 want=${SLURM_NODEID:-0}
    for g in "${groups[@]}"; do
        n=${g%%(*} k=1
        [[ $g == *'(x'* ]] && { k=${g#*(x}; k=${k%)}; }
        if ((want < node + k)); then lws=$n; break; fi
        node=$((node + k))
    done
fi
export LOCAL_WORLD_SIZE=${lws:-${SLURM_NTASKS_PER_NODE:-1}}
if [[ -z ${MASTER_ADDR:-} ]]; then
    first=$(scontrol show hostnames "${SLURM_STEP_NODELIST:-${SLURM_JOB_NODELIST:?}}" 2>/dev/null | head -n 1)
    [[ -n $first ]] || first=${SLURM_STEP_NODELIST:-$SLURM_JOB_NODELIST}
    addr=$(scontrol show node "$first" -o 2>/dev/null | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
    export MASTER_ADDR=${addr:-$first}
fi
export MASTER_PORT=${MASTER_PORT:-$((20000 + ${SLURM_JOB_ID:-0} % 20000))}
exec "$@"
