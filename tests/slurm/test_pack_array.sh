#!/usr/bin/env bash
# test_pack_array.sh — packing as a Slurm array under a real one-node Slurm (tests/slurm/cluster.sh):
# scripts/slurm/pack.sh submits a 4-part array (pack_array.sbatch) and its afterok verify step over
# an ImageNet-layout folder source. Mid-pack, part 1 is requeued by Slurm (`scontrol requeue`, as a
# node failure or pre-emption does) and part 3 is cancelled (`scancel JOB_3`); each is stopped first
# so it cannot finish in between. Slurm reruns part 1 (SLURM_RESTART_COUNT 1), which continues with
# --resume; the cancelled part removes the verify step (invalid dependency); resubmitting the same
# command finishes part 3 from its .partial (parts 0-2 exit at once) and the new verify step passes.
# The parts directory gives the same `fastload digest` stream (and record count) as a one-process
# pack of the same source and options.
# About 30-70 s on 2 shared cores (most of it zstd level 19, chosen so a part runs long enough to be
# stopped mid-way); label slurm, runs with FL_LONG_TESTS=1.
. "$(dirname "$0")/lib.sh"
for t in "$P" "$FLT"; do [[ -x $t ]] || { echo "SKIP: $t not built"; exit 77; }; done
/usr/bin/python3 -c "import PIL" 2>/dev/null || { echo "SKIP: /usr/bin/python3 without PIL (python3-pil)"; exit 77; }
/usr/bin/python3 "$SRC_DIR/bench/gen_imagenet_layout.py" "$W/src" --total 2000 --classes 10 --jobs 2 \
    >/dev/null 2>&1 || die "source generation (bench/gen_imagenet_layout.py)"
start_cluster
export PACKDATA="$P"
# not --quiet: the jobs' logs must show packdata's "resuming: N records already packed"
opts=(--encode raw --resize 32x32 --compress zstd:19 --shard-size 16K --shuffle --seed 7)
"$P" pack "$W/src" "$W/ref" "${opts[@]}" --workers 1 --quiet || die "one-process reference pack"

ids=$(bash "$SRC_DIR/scripts/slurm/pack.sh" --parts 4 --logs "$W/logs" "$W/src" "$W/job" "${opts[@]}") \
    || die "pack.sh submit"
eval "$ids"
[[ -n ${ARRAY_JOB:-} && -n ${VERIFY_JOB:-} ]] || die "pack.sh printed '$ids'"

# stop_mid PART: wait until the part has finished shards in its .partial, SIGSTOP its packdata
stop_mid() {
    local part=$1 i pid=""
    for ((i = 0; i < 3000; i++)); do
        if [[ -e $W/job/part-$part.partial/shard-00002.fls ]]; then
            pid=$(pgrep -f -- "$W/job/part-$part --part $part/4" | head -1)
            [[ -n $pid ]] && kill -STOP "$pid" && { echo "$pid"; return 0; }
        fi
        [[ -d $W/job/part-$part ]] && { echo "part $part finished before it could be stopped" >&2; return 1; }
        sleep 0.01
    done
    echo "part $part never started writing shards" >&2
    return 1
}
pid1=$(stop_mid 1) || die "could not catch part 1 mid-pack"
scontrol requeue "${ARRAY_JOB}_1" || die "scontrol requeue ${ARRAY_JOB}_1"
pid3=$(stop_mid 3) || die "could not catch part 3 mid-pack"
scancel "${ARRAY_JOB}_3" || die "scancel ${ARRAY_JOB}_3"
pass "part 1 requeued (pid $pid1) and part 3 cancelled (pid $pid3) mid-pack at $(elapsed) s"
wait_gone "$ARRAY_JOB" 120 || die "array job $ARRAY_JOB still queued after 120 s: $(squeue -j "$ARRAY_JOB")"
wait_gone "$VERIFY_JOB" 30 || die "verify job $VERIFY_JOB still queued although part 3 was cancelled"
[[ -d $W/job/part-0 && -d $W/job/part-1 && -d $W/job/part-2 ]] || fail "parts 0-2 not complete: $(ls "$W/job")"
[[ ! -e $W/job/part-3 && -d $W/job/part-3.partial ]] || fail "cancelled part 3: expected only part-3.partial: $(ls "$W/job")"
log1=$(cat "$W"/logs/pack-"${ARRAY_JOB}"_1.out 2>/dev/null)
grep -q "restart 1" <<<"$log1" || fail "part 1 was not rerun by Slurm: $log1"
grep -q "resuming: [1-9][0-9]* records already packed" <<<"$log1" || fail "requeued part 1 did not resume: $log1"
st=$(job_state "$VERIFY_JOB")
[[ $st == CANCELLED || -z $st ]] || fail "verify job after a cancelled part: state $st, want CANCELLED"
[[ $st == CANCELLED ]] && pass "requeued part 1 resumed under Slurm; the verify step was cancelled with part 3"

ids=$(bash "$SRC_DIR/scripts/slurm/pack.sh" --parts 4 --logs "$W/logs" --wait "$W/src" "$W/job" "${opts[@]}") \
    || die "resubmission: the verify step failed: $(cat "$W"/logs/verify-*.out "$W"/logs/pack-*.out 2>/dev/null | tail -20)"
eval "$ids"
grep -q "resuming: [1-9][0-9]* records already packed" "$W"/logs/pack-"${ARRAY_JOB}"_3.out ||
    fail "resubmitted part 3 did not resume: $(cat "$W"/logs/pack-"${ARRAY_JOB}"_3.out)"
pass "resubmission: part 3 resumed, verify job $VERIFY_JOB passed"

want=$("$FLT" digest "$W/ref" --order seq --batch 50 --workers 2 2>&1 | tail -1)
got=$("$FLT" digest "$W/job" --order seq --batch 50 --workers 2 2>&1 | tail -1)
[[ -n $want && $got == "$want" ]] || fail "digest of the parts '$got', one-process pack '$want'"
want=$("$FLT" digest "$W/ref" --order random --seed 3 --batch 64 --workers 2 2>&1 | tail -1)
got=$("$FLT" digest "$W/job" --order random --seed 3 --batch 64 --workers 2 2>&1 | tail -1)
[[ -n $want && $got == "$want" ]] || fail "random-order digest of the parts '$got', one-process pack '$want'"
n_ref=$("$P" info "$W/ref" --json | grep -o '"records":[0-9]*' | head -1)
n_job=$("$P" info "$W/job" --json | grep -o '"records":[0-9]*' | head -1)
[[ $n_ref == "$n_job" && -n $n_ref ]] || fail "records: parts $n_job, one process $n_ref"
pass "4-part array (one part requeued, one cancelled + resubmitted) == one-process pack: same digest stream, $n_ref"
finish
