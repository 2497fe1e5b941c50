#!/usr/bin/env bash
# test_checkpoint_keep.sh — a run keeps the checkpoint it has just written and the one before it,
# whatever else the folder holds. A --resume skips damaged checkpoints of later steps (a copy cut
# short, a disk error) and continues from the newest valid one; each checkpoint it then wrote was
# deleted at once, with the one it resumed from, as "older than the newest two" (the damaged
# ones), leaving no valid checkpoint after an exit 0 or a SIGTERM.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$TF"
make_train_data "$T/data" 300 100 || die "fixture"
common=(--data "$T/data/train" --val "$T/data/val" --width 4 --batch 50 --seed 1 --threads 2
        --quiet --epochs 100000 --checkpoint-every 1)
C="$T/ck"

# run_then_term SINCE [options]: train into C until a checkpoint later than SINCE (not the damaged
# ones) is there, or 2 s passed, then SIGTERM; the exit status in `st`
run_then_term() {
    local since=$1
    shift
    "$TF" train "${common[@]}" --checkpoint "$C" "$@" 2>"$T/errA" >/dev/null &
    local a=$!
    for _ in $(seq 40); do
        local f new=""
        for f in "$C"/ckpt-*.tfc; do
            f=$(basename "$f")
            [[ $f > "$since" && $f < ckpt-99999990.tfc && -e $C/$f ]] && new=$f
        done
        [[ -n $new ]] && break
        kill -0 "$a" 2>/dev/null || break
        sleep 0.05
    done
    kill -TERM "$a" 2>/dev/null
    wait "$a"
    st=$?
}

# newest_valid: the file name of the newest checkpoint of C that eval accepts (empty: none)
newest_valid() {
    local f
    for f in $(ls "$C"/ckpt-*.tfc 2>/dev/null | sort -r); do
        "$TF" eval "$f" "$T/data/val" >/dev/null 2>&1 && { basename "$f"; return; }
    done
}

run_then_term ""
[[ $st -eq 143 ]] || die "first run: exit $st after SIGTERM ($(tail -2 "$T/errA"))"
first=$(newest_valid)
[[ -n $first ]] || die "first run: no valid checkpoint"
# two damaged checkpoints of later steps
head -c 1000 "$C/$first" >"$C/ckpt-99999990.tfc"
head -c 1000 "$C/$first" >"$C/ckpt-99999999.tfc"

run_then_term "$first" --resume
[[ $st -eq 143 ]] || fail "resumed run: exit $st after SIGTERM, want 143 ($(tail -2 "$T/errA"))"
grep -q "skipped unreadable or damaged" "$T/errA" || fail "resumed run: no warning about the damaged checkpoints"
now=$(newest_valid)
if [[ -z $now ]]; then
    fail "resumed run: no valid checkpoint left (only: $(cd "$C" && ls | tr '\n' ' '))"
elif [[ $now < $first || $now == "$first" ]]; then
    fail "resumed run: its newest valid checkpoint is $now, not later than $first"
else
    pass "resumed past damaged later checkpoints: $first -> $now kept"
fi
expect_status 0 "eval DIR after the resumed run" -- "$TF" eval "$C" "$T/data/val"
expect_err "$now" "eval DIR takes the resumed run's newest checkpoint"
finish
