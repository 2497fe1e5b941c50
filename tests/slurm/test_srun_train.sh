#!/usr/bin/env bash
# test_srun_train.sh — data-parallel CPU training under a real one-node Slurm (tests/slurm/cluster.sh):
#   1. `srun -n 2 --mpi=pmix trainfast train ...` ends with the same weights, bit for bit, and the
#      same per-epoch losses as `trainfast train --nproc 2 ...` (mpirun); its JSON says world 2.
#      (--mpi=pmi2 does not work with Debian 12's Open MPI 4.1, built with PMIx only: MPI_Init
#      fails with "OMPI was not built with SLURM's PMI support"; docs/DISTRIBUTED.md.)
#   2. `srun -n 2` without --mpi (no PMI for MPI to use) is refused with a clear error.
#   3. An sbatch job (-n 2, srun --mpi=pmix inside) cancelled mid-run with `scancel JOB` (Slurm sends
#      SIGTERM to every task): the ranks stop after the same step, rank 0 writes a checkpoint; the
#      same job resubmitted with --resume ends with the same weights, bit for bit, and the same
#      final losses as an uninterrupted 2-rank run.
# About 20-40 s on 2 shared cores; label slurm, runs with FL_LONG_TESTS=1.
. "$(dirname "$0")/lib.sh"
MK="$B/tests/trainer/tf_make_dataset"
CMP="$B/tests/trainer/tf_ckpt_compare"
for t in "$TF" "$MK" "$CMP"; do [[ -x $t ]] || { echo "SKIP: $t not built"; exit 77; }; done
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (apt-get install openmpi-bin)"; exit 77; }
grep -q "TF_HAVE_MPI:INTERNAL=ON" "$B/CMakeCache.txt" 2>/dev/null || { echo "SKIP: trainfast built without MPI"; exit 77; }
export OMPI_MCA_rmaps_base_oversubscribe=1
"$MK" "$W/train" 600 16 16 1 4 1 >/dev/null || die "fixture"
"$MK" "$W/val" 100 16 16 1 4 2 >/dev/null || die "fixture"
common=(--data "$W/train" --val "$W/val" --width 8 --seed 3 --threads 1 --workers 1 --device cpu --batch 30)
start_cluster
epoch_losses() { grep -o '^epoch [0-9]*/[0-9]*  train loss [0-9.]*.*val loss [0-9.]*' "$1"; }

# ---- 1. srun --mpi=pmix == --nproc 2 ----------------------------------------------------------
timeout 120 "$TF" train --nproc 2 "${common[@]}" --epochs 3 --checkpoint "$W/np" >"$W/np.out" 2>"$W/np.err" ||
    { cat "$W/np.err"; die "--nproc 2 run"; }
timeout 120 srun -n 2 --mpi=pmix "$TF" train "${common[@]}" --epochs 3 --checkpoint "$W/sr" --json \
    >"$W/sr.out" 2>"$W/sr.err" || { cat "$W/sr.err"; die "srun -n 2 --mpi=pmix run"; }
last=$(grep '"val_top1"' "$W/sr.out" | tail -n 1)
[[ $last == *'"world":2'* && $last == *'"global_batch":60'* ]] || fail "srun JSON: $last"
[[ $(grep -c '"val_top1"' "$W/sr.out") -eq 1 ]] || fail "more than one rank printed JSON under srun"
a=$(epoch_losses "$W/np.err") b=$(epoch_losses "$W/sr.err")
[[ -n $a && $a == "$b" ]] || fail "per-epoch losses differ: --nproc 2: '$a' srun: '$b'"
"$CMP" "$W/np/ckpt-00000030.tfc" "$W/sr/ckpt-00000030.tfc" >/dev/null ||
    fail "srun -n 2 --mpi=pmix and --nproc 2 end with different weights"
pass "srun -n 2 --mpi=pmix == --nproc 2: same epoch losses, identical weights ($(elapsed) s)"

# ---- 2. srun without a PMI plugin ---------------------------------------------------------------
timeout 60 srun -n 2 --mpi=none "$TF" train "${common[@]}" --epochs 1 >/dev/null 2>"$W/none.err" &&
    fail "srun -n 2 --mpi=none was accepted"
grep -q "no MPI launcher started this process" "$W/none.err" && grep -q "srun --mpi=pmix" "$W/none.err" ||
    fail "srun without --mpi: unclear error: $(head -3 "$W/none.err")"
pass "srun -n 2 --mpi=none refused: $(grep -m1 'no MPI launcher' "$W/none.err" | cut -c1-110)..."

# ---- 3. scancel (SIGTERM) checkpoints; resubmission resumes exactly ----------------------------
long=("${common[@]}" --epochs 12 --checkpoint-every 4)
timeout 180 "$TF" train --nproc 2 "${long[@]}" --checkpoint "$W/ref" --json >"$W/ref.out" 2>"$W/ref.err" ||
    { cat "$W/ref.err"; die "uninterrupted --nproc 2 reference"; }
cat >"$W/train.sbatch" <<EOS
#!/bin/bash
#SBATCH -n 2
#SBATCH --output=$W/job-%j.out
srun --mpi=pmix "$TF" train ${long[*]} --checkpoint "$W/ck" --json "\$@"
EOS
j1=$(sbatch --parsable "$W/train.sbatch") || die "sbatch"
for ((i = 0; i < 3000; i++)); do
    compgen -G "$W/ck/ckpt-*.tfc" >/dev/null && break
    [[ -z $(squeue -h -j "$j1" -o %i) ]] && break
    sleep 0.01
done
scancel "$j1" || die "scancel $j1"
wait_gone "$j1" 60 || die "job $j1 still there 60 s after scancel"
grep -q "stopped by SIGTERM" "$W/job-$j1.out" || { cat "$W/job-$j1.out"; die "the job did not stop on SIGTERM"; }
[[ $(grep -c "stopped by SIGTERM" "$W/job-$j1.out") -eq 1 ]] || fail "more than one rank reported the stop"
[[ ! -f $W/ck/ckpt-00000120.tfc ]] || die "the job finished before scancel reached it"
stop_line=$(grep -m1 "stopped by SIGTERM" "$W/job-$j1.out")
j2=$(sbatch --parsable "$W/train.sbatch" --resume) || die "sbatch --resume"
wait_gone "$j2" 180 || die "resumed job $j2 still running after 180 s"
[[ $(job_state "$j2") == COMPLETED ]] || { cat "$W/job-$j2.out"; die "resumed job $j2: $(job_state "$j2")"; }
# the job log interleaves the ranks' stdout and stderr: take the JSON summary line itself
last=$(grep '"val_top1"' "$W/job-$j2.out" | tail -n 1)
[[ $last == *'"resumed":true'* ]] || fail "the resubmitted job did not resume: $last"
"$CMP" "$W/ref/ckpt-00000120.tfc" "$W/ck/ckpt-00000120.tfc" >/dev/null ||
    fail "scancel + resubmit --resume: final weights differ from the uninterrupted run"
a=$(epoch_losses "$W/ref.err" | tail -n 2) b=$(epoch_losses "$W/job-$j2.out" | tail -n 2)
[[ -n $a && $a == "$b" ]] || fail "last epochs' losses: uninterrupted '$a', resumed '$b'"
vl() { sed -n 's/.*"val_loss":\([0-9.e+-]*\).*/\1/p' <<<"$1"; }
[[ -n $(vl "$last") && $(vl "$(grep '"val_top1"' "$W/ref.out" | tail -n 1)") == "$(vl "$last")" ]] || fail "final val_loss differs"
pass "scancel ($stop_line) + resubmit --resume == uninterrupted: identical weights, same losses"
finish
