#!/usr/bin/env bash
# test_checkpoint_shared.sh — two `trainfast train` runs given the same --checkpoint DIR (two
# experiments with one folder; a requeued job started while the old one still runs). Each run
# writes ckpt-<step>.tfc, deletes all but its newest two and any ckpt-*.tfc.tmp: the second run
# would overwrite and delete the first's checkpoints (and its half-written one). The second is
# refused before its first step (exit 2, naming DIR and the holder's pid) and writes nothing; the
# first run is undisturbed; once it has ended the folder is free again (also after a kill -9).
# A new run (no --resume) into a folder that holds checkpoints is refused too.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$TF"
make_train_data "$T/data" 300 100 || die "fixture"
common=(--data "$T/data/train" --val "$T/data/val" --width 4 --batch 50 --seed 1 --threads 2
        --quiet)
C="$T/ck"

# long_run DIR [options]: start a run that trains until stopped, into DIR; its pid in `a` once it
# holds DIR's lock (0 when it ended first)
long_run() {
    local dir=$1
    shift
    "$TF" train "${common[@]}" --epochs 100000 --checkpoint "$dir" "$@" 2>"$T/errA" >/dev/null &
    a=$!
    for _ in $(seq 600); do
        [[ $(cat "$dir/.trainfast.lock" 2>/dev/null) == "$a" ]] && return 0
        kill -0 "$a" 2>/dev/null || break
        sleep 0.05
    done
    fail "a run into $(basename "$dir") did not take its lock: $(tail -2 "$T/errA")"
    kill -KILL "$a" 2>/dev/null
    wait "$a" 2>/dev/null
    a=0
}

# A: a long run (stopped by the test), holding C, that has written a checkpoint
"$TF" train "${common[@]}" --epochs 100000 --checkpoint "$C" --checkpoint-every 1 2>"$T/errA" \
    >/dev/null &
a=$!
for _ in $(seq 600); do
    [[ -n $(newest_ckpt "$C") ]] && break
    kill -0 "$a" 2>/dev/null || die "the first run ended: $(cat "$T/errA")"
    sleep 0.05
done
[[ -n $(newest_ckpt "$C") ]] || die "the first run wrote no checkpoint in 30 s"
# B: another experiment into the same folder, while A runs
expect_status 2 "a second run into a folder in use" -- \
    "$TF" train "${common[@]}" --epochs 2 --lr 0.05 --checkpoint "$C" --log "$T/logB" &&
    pass "the second run is refused: $(grep error: "$T/err" | head -1 | sed "s|$T/||g")"
expect_err "--checkpoint $C is in use by another training run (process $a" \
    "the refusal names the folder and the holder's pid"
[[ -s $T/logB ]] && fail "the second run trained before it was refused"
# B --resume (a requeued job while the old one still runs): refused too
expect_status 2 "a --resume into a folder in use" -- \
    timeout 30 "$TF" train "${common[@]}" --epochs 100000 --checkpoint "$C" --resume
expect_err "is in use by another training run" "the --resume refusal says why"

# A is undisturbed: stop it (SIGTERM writes its checkpoint), its checkpoints verify, resume works
kill -TERM "$a"
wait "$a"
st=$?
[[ $st -eq 143 ]] || fail "the first run: exit $st after SIGTERM, want 143 ($(tail -2 "$T/errA"))"
n=0
for f in "$C"/ckpt-*.tfc; do
    [[ -e $f ]] || continue
    n=$((n + 1))
    "$TF" eval "$f" "$T/data/val" >/dev/null 2>&1 || fail "$(basename "$f") does not load"
done
[[ $n -ge 1 ]] || fail "the first run left no checkpoint"
ls "$C"/*.tmp >/dev/null 2>&1 && fail "a .tmp file is left in the folder"
pass "the first run kept its $n checkpoint(s)"

# the folder is free once its run has ended (SIGTERM above, kill -9 here)
long_run "$C" --resume
[[ $a -ne 0 ]] && pass "a --resume takes the folder after its holder stopped on SIGTERM"
kill -KILL "$a" 2>/dev/null
wait "$a" 2>/dev/null
long_run "$C" --resume
[[ $a -ne 0 ]] && pass "a --resume takes the folder after its holder was killed with SIGKILL"
kill -TERM "$a" 2>/dev/null
wait "$a" 2>/dev/null

# a new run (no --resume) into a folder holding an earlier run's checkpoints: those of later steps
# would stay the newest (what --resume and eval DIR take), the others be deleted as it writes
newest=$(newest_ckpt "$C")
[[ -n $newest ]] || die "no checkpoint left in the folder"
before=$(cd "$C" && sha256sum ckpt-*.tfc)
expect_status 2 "a new run into a folder holding checkpoints" -- \
    "$TF" train "${common[@]}" --epochs 1 --lr 0.05 --checkpoint "$C" --log "$T/logC" &&
    pass "a new run among an earlier run's checkpoints is refused: $(grep error: "$T/err" | head -1 | sed "s|$T/||g")"
expect_err "already holds checkpoints of an earlier run (newest: $(basename "$newest"))" \
    "the refusal names the newest checkpoint"
expect_err "--resume" "the refusal names --resume"
[[ -s $T/logC ]] && fail "the new run trained before it was refused"
[[ $(cd "$C" && sha256sum ckpt-*.tfc) == "$before" ]] || fail "the earlier run's checkpoints changed"
finish
