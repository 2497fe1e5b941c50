#!/usr/bin/env bash
# test_dist.sh MODE — data-parallel trainfast over MPI on the CPU (docs/DISTRIBUTED.md).
#   equal   `trainfast train --nproc 2 --sync-bn` (batch b per rank) ends with the same weights as one
#           process with batch 2b and the same seed, within a relative L2 tolerance of 1e-3 (not
#           bit-exact: the gradient and BN sums are added in another order); the env-only launch
#           with WORLD_SIZE=2 is refused with a clear error.
#   uneven  a dataset that divides neither by the world nor by world x batch: every rank runs the
#           same number of steps (tail padded by wrap-around) and the job ends (no hang).
#   kill    kill -9 one rank mid-run: mpirun and every rank are gone within 30 s with a non-zero
#           status; --resume (2 processes) continues from the last checkpoint and finishes.
#   reworld a 2-process run stopped by SIGTERM sent to its ranks (they agree on the step and
#           checkpoint) is resumed on 1 process: it finishes, and the samples it trains are exactly
#           the ones the 2-process run had not reached (logged sample count).
#   hang    SIGSTOP one rank (hung, not dead): the collective watchdog (TRAINFAST_DIST_TIMEOUT=3)
#           ends the job with a message naming the collective, within 30 s.
# Skips (77) without mpirun or in a build without MPI.
set -u
MODE="${1:?usage: test_dist.sh equal|uneven|kill|reworld|hang}"
B="${FL_BINARY_DIR:?}"
T="$B/trainer/trainfast"
MK="$B/tests/trainer/tf_make_dataset"
DIFF="$B/tests/trainer/tf_ckpt_diff"
command -v mpirun > /dev/null || { echo "SKIP: no mpirun (apt-get install openmpi-bin)"; exit 77; }
if ! grep -q "TF_HAVE_MPI:INTERNAL=ON" "$B/CMakeCache.txt" 2> /dev/null; then
    echo "SKIP: trainfast built without MPI"
    exit 77
fi
W="$(mktemp -d "${TMPDIR:-/tmp}/tf_dist.XXXXXX")"
MPIPID=""
cleanup() {
    [[ -n "$MPIPID" ]] && kill -9 "$MPIPID" 2> /dev/null
    rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
# OpenMPI's own allocations look like leaks to LeakSanitizer; the other sanitizers stay on
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
export OMPI_MCA_rmaps_base_oversubscribe=1
MPI=(mpirun --oversubscribe --bind-to none)
[[ $(id -u) -eq 0 ]] && MPI+=(--allow-run-as-root)
json_field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" <<< "$2"; }

"$MK" "$W/val" 200 16 16 1 4 2 > /dev/null || fail "fixture"
common=(--val "$W/val" --width 8 --seed 3 --threads 1 --workers 1 --device cpu --quiet)

case "$MODE" in
equal)
    "$MK" "$W/train" 1200 16 16 1 4 1 > /dev/null || fail "fixture"
    timeout 60 "$T" train --nproc 2 --sync-bn --data "$W/train" "${common[@]}" --batch 30 \
        --epochs 2 --checkpoint "$W/two" --json > "$W/two.out" 2> "$W/two.err" \
        || { cat "$W/two.err"; fail "2-process run (--nproc 2)"; }
    timeout 60 "$T" train --data "$W/train" "${common[@]}" --batch 60 --epochs 2 \
        --checkpoint "$W/one" > /dev/null 2> "$W/one.err" || { cat "$W/one.err"; fail "1-process run"; }
    last=$(tail -n 1 "$W/two.out")
    [[ $(json_field world "$last") == 2 && $(json_field global_batch "$last") == 60 ]] \
        || fail "2-process JSON: $last"
    [[ $(grep -c '"val_top1"' "$W/two.out") -eq 1 ]] || fail "more than one rank printed JSON"
    "$DIFF" "$W/one/ckpt-00000040.tfc" "$W/two/ckpt-00000040.tfc" 1e-3 \
        || fail "2 processes x batch 30 (--sync-bn) differ from 1 process x batch 60"
    echo "ok   2 x 30 (--sync-bn) == 1 x 60 within 1e-3 relative L2"
    WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 "$T" train --data "$W/train" "${common[@]}" --batch 30 \
        2> "$W/env.err" && fail "WORLD_SIZE=2 without an MPI launcher was accepted"
    grep -q "no MPI launcher" "$W/env.err" || fail "env launch error: $(cat "$W/env.err")"
    echo "ok   env-only world 2: $(head -n 1 "$W/env.err")"
    ;;
uneven)
    "$MK" "$W/train" 1001 16 16 1 4 1 > /dev/null || fail "fixture"
    # 1001 records, 2 ranks x 50: 501 per rank -> 11 batches each, the tail padded by wrap-around
    timeout 60 "${MPI[@]}" -np 2 "$T" train --data "$W/train" "${common[@]}" --batch 50 \
        --epochs 2 --json > "$W/u.out" 2> "$W/u.err"
    rc=$?
    [[ $rc -ne 124 ]] || fail "uneven dataset: the job hung (killed after 60 s)"
    [[ $rc -eq 0 ]] || { cat "$W/u.err"; fail "uneven dataset: exit $rc"; }
    last=$(tail -n 1 "$W/u.out")
    smin=$(json_field steps_min "$last")
    smax=$(json_field steps_max "$last")
    [[ "$smin" == 22 && "$smax" == 22 ]] || fail "steps per rank $smin..$smax, expected 22 (2 x 11)"
    [[ $(json_field samples_run "$last") == 2200 ]] || fail "samples: $last"
    echo "ok   1001 records on 2 ranks x 50: both ranks ran $smin steps, 2200 samples (padded)"
    ;;
kill)
    "$MK" "$W/train" 1200 16 16 1 4 1 > /dev/null || fail "fixture"
    args=(--data "$W/train" "${common[@]}" --batch 30 --epochs 8 --checkpoint "$W/k" --checkpoint-every 5)
    "${MPI[@]}" -np 2 "$T" train "${args[@]}" > /dev/null 2> "$W/k.err" &
    MPIPID=$!
    for _ in $(seq 1 1500); do
        compgen -G "$W/k/ckpt-*.tfc" > /dev/null && break
        sleep 0.02
    done
    ranks=$(pgrep -P "$MPIPID" | tr '\n' ' ')
    [[ $(wc -w <<< "$ranks") -eq 2 ]] || fail "expected 2 rank processes under mpirun, got '$ranks'"
    victim=$(awk '{print $NF}' <<< "$ranks")
    kill -9 "$victim"
    t0=$(date +%s)
    for _ in $(seq 1 300); do
        kill -0 "$MPIPID" 2> /dev/null || break
        sleep 0.1
    done
    kill -0 "$MPIPID" 2> /dev/null && fail "mpirun still running 30 s after kill -9 of rank pid $victim"
    wait "$MPIPID"
    rc=$?
    MPIPID=""
    [[ $rc -ne 0 ]] || fail "mpirun exited 0 after a rank was killed"
    # mpirun may return just before the kernel has finished tearing the other rank down
    for p in $ranks; do
        for _ in $(seq 1 100); do
            st=$(ps -o stat= -p "$p" 2> /dev/null)
            [[ -z "$st" || "$st" == Z* ]] && break
            sleep 0.1
        done
        [[ -z "$st" || "$st" == Z* ]] || fail "rank process $p still alive 10 s after mpirun ended"
    done
    grep -q "exited on signal 9" "$W/k.err" || fail "no clear error from mpirun: $(cat "$W/k.err")"
    echo "ok   kill -9 rank: job ended in $(($(date +%s) - t0)) s, mpirun exit $rc, every rank gone"
    ls "$W/k"/ckpt-*.tfc > /dev/null 2>&1 || fail "no checkpoint left"
    timeout 60 "${MPI[@]}" -np 2 "$T" train "${args[@]}" --resume --json > "$W/r.out" 2> "$W/r.err" \
        || { cat "$W/r.err"; fail "--resume after the kill"; }
    last=$(tail -n 1 "$W/r.out")
    grep -q '"resumed":true' <<< "$last" || fail "not resumed: $last"
    [[ -f "$W/k/ckpt-00000160.tfc" ]] || fail "resumed run did not reach step 160: $(ls "$W/k")"
    echo "ok   --resume on 2 processes from epoch $(($(json_field start_epoch "$last") + 1)) sample $(json_field start_sample "$last") finished at step 160"
    ;;
reworld)
    "$MK" "$W/train" 1200 16 16 1 4 1 > /dev/null || fail "fixture"
    args=(--data "$W/train" "${common[@]}" --epochs 30 --checkpoint "$W/c" --checkpoint-every 3)
    "${MPI[@]}" -np 2 "$T" train "${args[@]}" --batch 30 > /dev/null 2> "$W/a.err" &
    MPIPID=$!
    # stop as soon as the first checkpoint exists: the run is long enough (600 steps) that the
    # stop lands mid-run even on an idle machine
    for _ in $(seq 1 1500); do
        compgen -G "$W/c/ckpt-*.tfc" > /dev/null && break
        sleep 0.02
    done
    # signal the ranks themselves (as a batch system's pre-emption notice reaches every task):
    # whether mpirun forwards a SIGTERM before its own teardown is OpenMPI's business, not ours
    ranks=$(pgrep -P "$MPIPID" -x trainfast)
    [[ -n "$ranks" ]] || fail "no trainfast rank under mpirun"
    kill -TERM $ranks
    for _ in $(seq 1 300); do
        kill -0 "$MPIPID" 2> /dev/null || break
        sleep 0.1
    done
    wait "$MPIPID"
    MPIPID=""
    grep -q "stopped by SIGTERM" "$W/a.err" || { cat "$W/a.err"; ls "$W/c"; fail "the 2-process run did not stop on SIGTERM"; }
    [[ $(grep -c "stopped by SIGTERM" "$W/a.err") -eq 1 ]] || fail "more than one rank reported the stop"
    # resume on 1 process: global batch 60 kept (batch 60 per rank), same position
    timeout 60 "$T" train "${args[@]}" --resume --json > "$W/b.out" 2> "$W/b.err" \
        || { cat "$W/b.err"; fail "resume on 1 process"; }
    grep -q "same global batch 60" "$W/b.err" || fail "no world-change line: $(cat "$W/b.err")"
    last=$(tail -n 1 "$W/b.out")
    se=$(json_field start_epoch "$last")
    ss=$(json_field start_sample "$last")
    n=$(json_field samples_run "$last")
    want=$(((30 - se) * 1200 - ss))
    [[ "$n" == "$want" ]] || fail "resumed run trained $n samples, expected $want (from epoch $((se + 1)) sample $ss)"
    [[ -f "$W/c/ckpt-00000600.tfc" ]] || fail "resumed run did not end at step 600: $(ls "$W/c")"
    echo "ok   2 -> 1 process: resumed at epoch $((se + 1)) sample $ss, trained the remaining $n samples once"
    ;;
hang)
    "$MK" "$W/train" 1200 16 16 1 4 1 > /dev/null || fail "fixture"
    TRAINFAST_DIST_TIMEOUT=3 "${MPI[@]}" -np 2 "$T" train --data "$W/train" "${common[@]}" \
        --batch 30 --epochs 40 --checkpoint "$W/h" --checkpoint-every 5 > /dev/null 2> "$W/h.err" &
    MPIPID=$!
    for _ in $(seq 1 1500); do
        compgen -G "$W/h/ckpt-*.tfc" > /dev/null && break
        sleep 0.02
    done
    ranks=$(pgrep -P "$MPIPID" | tr '\n' ' ')
    [[ $(wc -w <<< "$ranks") -eq 2 ]] || fail "expected 2 rank processes under mpirun, got '$ranks'"
    victim=$(awk '{print $NF}' <<< "$ranks")
    kill -STOP "$victim" # hung, not dead: mpirun alone would wait forever
    t0=$(date +%s)
    for _ in $(seq 1 300); do
        kill -0 "$MPIPID" 2> /dev/null || break
        sleep 0.1
    done
    kill -0 "$MPIPID" 2> /dev/null && { kill -CONT "$victim"; fail "job still running 30 s after a rank hung"; }
    wait "$MPIPID"
    rc=$?
    MPIPID=""
    [[ $rc -ne 0 ]] || fail "mpirun exited 0 after a rank hung"
    grep -q "has waited .* for the other ranks" "$W/h.err" || fail "no watchdog message: $(cat "$W/h.err")"
    echo "ok   hung rank (SIGSTOP): watchdog ended the job in $(($(date +%s) - t0)) s: $(grep -m1 'has waited' "$W/h.err")"
    ;;
*)
    fail "unknown mode $MODE"
    ;;
esac
echo PASS
