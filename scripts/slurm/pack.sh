#!/usr/bin/env bash
# pack.sh — pack a data set on a Slurm cluster: one array job with a task per part
# (pack_array.sbatch: packdata pack SRC OUTDIR/part-I --part I/N --resume) and a check step
# (verify.sbatch: packdata verify OUTDIR) that runs only when every task succeeded
# (--dependency=afterok; --kill-on-invalid-dep=yes removes it when a task failed).
#
# Usage: scripts/slurm/pack.sh [--parts N] [--cpus C] [--tasks LIST] [--logs DIR] [--wait]
#                              [--sbatch ARG]... SRC OUTDIR [packdata pack options]
#   --parts N      parts = array tasks (default 4); keep it the same on every resubmission
#   --cpus C       CPUs per task (default 1); packdata's --workers follows it
#   --tasks LIST   submit only these array indices (e.g. 1,3), default 0-(N-1)
#   --logs DIR     the jobs' output files (default OUTDIR.logs: not inside OUTDIR, which must
#                  hold only the parts)
#   --wait         wait for the verify job and exit with its status (0: the dataset is complete)
#   --sbatch ARG   one more sbatch argument for both jobs (partition, account, time...), repeatable
# Prints `ARRAY_JOB=J VERIFY_JOB=V` on stdout. After a failure (a task cancelled, out of time, a node
# lost for good) run the same command again: every task passes --resume, finished parts exit at
# once, interrupted ones continue from their .partial directory. Tasks that Slurm itself requeues
# (#SBATCH --requeue: node failure, pre-emption, `scontrol requeue`) resume the same way and the
# verify job keeps waiting for them.
# Environment: PACKDATA (the packdata binary the jobs run; default: packdata on PATH).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage() { sed -n '7,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
parts=4 cpus=1 tasks="" logs="" wait=0 extra=()
while [[ $# -gt 0 && $1 == --* ]]; do
    case "$1" in
        --parts) parts=${2:?}; shift 2 ;;
        --cpus) cpus=${2:?}; shift 2 ;;
        --tasks) tasks=${2:?}; shift 2 ;;
        --logs) logs=${2:?}; shift 2 ;;
        --wait) wait=1; shift ;;
        --sbatch) extra+=("${2:?}"); shift 2 ;;
        -h|--help) usage ;;
        *) echo "pack.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
done
[[ $# -ge 2 ]] || usage
[[ $parts =~ ^[1-9][0-9]*$ && $cpus =~ ^[1-9][0-9]*$ ]] || { echo "pack.sh: --parts and --cpus want positive integers" >&2; exit 2; }
command -v sbatch >/dev/null || { echo "pack.sh: sbatch not found (is this a Slurm login node?)" >&2; exit 1; }
src=$(realpath -m -- "$1") out=$(realpath -m -- "$2")
shift 2
[[ -e $src ]] || { echo "pack.sh: $src does not exist" >&2; exit 2; }
logs=$(realpath -m -- "${logs:-$out.logs}")
mkdir -p "$logs" "$out"
if [[ -n ${PACKDATA:-} && $PACKDATA == */* ]]; then export PACKDATA=$(realpath -- "$PACKDATA"); fi
array=${tasks:-0-$((parts - 1))}
jid=$(sbatch --parsable --array="$array" --cpus-per-task="$cpus" --output="$logs/pack-%A_%a.out" \
    "${extra[@]}" "$here/pack_array.sbatch" "$parts" "$src" "$out" "$@")
jid=${jid%%;*}
vid=$(sbatch --parsable --dependency="afterok:$jid" --kill-on-invalid-dep=yes \
    --output="$logs/verify-%j.out" "${extra[@]}" "$here/verify.sbatch" "$out")
vid=${vid%%;*}
echo "pack.sh: array job $jid (tasks $array of $parts parts, $cpus CPU(s) each), verify job $vid after it; logs in $logs" >&2
echo "ARRAY_JOB=$jid VERIFY_JOB=$vid"
((wait)) || exit 0
# the verify job ends COMPLETED (exit 0), FAILED, or CANCELLED when a task failed
while :; do
    st=$(squeue -h -j "$vid" -o %T 2>/dev/null || true)
    [[ -z $st ]] && break
    sleep 2
done
info=$(scontrol show job "$vid" 2>/dev/null || true)
state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info" | head -1)
echo "pack.sh: verify job $vid: ${state:-gone (older than MinJobAge)}" >&2
[[ $state == COMPLETED ]]
