#!/usr/bin/env bash
# test_kill_train.sh — SIGTERM (one trial SIGINT, one SIGHUP) and SIGKILL at random points of
# `trainfast train --device cpu` with frequent checkpoints: after each signal every ckpt-*.tfc
# left verifies (never a torn one under the final name); `--resume` continues from the newest
# complete checkpoint and ends with weights bit-identical to an uninterrupted run; SIGTERM/SIGINT/
# SIGHUP exit 143/130/129 after saving (a closed terminal no longer loses the run's progress). Then the newest checkpoint is truncated (a torn file, as a
# non-atomic filesystem could leave): resume falls back to the previous one with a warning naming
# the file, again to identical weights; with every checkpoint damaged, resume fails clearly. A
# SIGHUP ignored when the run starts (nohup) stays ignored.
# Default: 3 SIGTERM/SIGINT + 5 SIGKILL trials; FL_LONG_TESTS=1: 10 + 25. FL_REL_SEED=S replays.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$TF"
if ((LONG)); then nterm=10 nkill=25; else nterm=3 nkill=5; fi
sanitized && ((!LONG)) && nterm=2 nkill=3
seed=${FL_REL_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$seed
echo "seed $seed (FL_REL_SEED=$seed replays these kill points), $nterm SIGTERM/SIGHUP/SIGINT + $nkill SIGKILL trials"
make_train_data "$T/data" 1500 200 || die "fixture"
every=5
common=(--data "$T/data/train" --val "$T/data/val" --device cpu --width 8 --batch 50 --epochs 2
        --seed 7 --threads 2 --quiet --checkpoint-every $every)
"$TF" train "${common[@]}" --checkpoint "$T/ref" 2>"$T/err" || die "reference run: $(cat "$T/err")"
ref=$(newest_ckpt "$T/ref")
steps=$((10#$(basename "$ref" .tfc | sed 's/ckpt-//')))
echo "reference: $steps steps, checkpoint every $every"

shopt -s nullglob
newest_step() {
    local f=$(newest_ckpt "$1")
    [[ -n $f ]] && echo $((10#$(basename "$f" .tfc | sed 's/ckpt-//'))) || echo -1
}
# signal_at SIG STEP MS DIR: train into DIR, send SIG MS ms after a checkpoint of step >= STEP
signal_at() {
    local sig=$1 step=$2 ms=$3 d=$4
    "$TF" train "${common[@]}" --checkpoint "$d" ${resume:+--resume} >/dev/null 2>"$T/kerr" &
    local pid=$!
    while kill -0 $pid 2>/dev/null && (( $(newest_step "$d") < step )); do sleep 0.005; done
    sleep "0.0$(printf '%02d' "$ms")"
    kill -$sig $pid 2>/dev/null
    wait $pid 2>/dev/null
}
# all_verify DIR: every ckpt-*.tfc in DIR verifies
all_verify() {
    local f ok=0
    for f in "$1"/ckpt-*.tfc; do
        "$TF" eval "$f" "$T/data/val" >/dev/null 2>"$T/everr" || { echo "$(basename "$f"): $(cat "$T/everr")"; ok=1; }
    done
    return $ok
}

for ((i = 0; i < nterm + nkill; i++)); do
    if ((i == nterm - 1)); then sig=INT want=130
    elif ((i == nterm - 2)); then sig=HUP want=129
    elif ((i < nterm)); then sig=TERM want=143
    else sig=KILL want=137; fi
    d="$T/run$i"
    step=$(( (RANDOM * 32768 + RANDOM) % steps )) ms=$((RANDOM % 40))
    resume= signal_at $sig $step $ms "$d"
    st=$?
    where="SIG$sig after step $step + $ms ms"
    if [[ $st -ne 0 && $st -ne $want ]]; then fail "$where: exit $st, want $want"; sed 's/^/    /' "$T/kerr" | head -3; continue; fi
    if [[ $sig != KILL && $st -eq $want ]]; then
        grep -q "stopped by SIG$sig" "$T/kerr" || fail "$where: no stop line: $(head -2 "$T/kerr")"
    fi
    msg=$(all_verify "$d") || fail "$where: a checkpoint left does not verify: $msg"
    left=$(newest_step "$d")
    if [[ $st -ne 0 ]]; then
        expect_status 0 "$where: --resume" -- "$TF" train "${common[@]}" --checkpoint "$d" --resume
    fi
    got=$(newest_ckpt "$d")
    [[ $(basename "$got") == $(basename "$ref") ]] || { fail "$where: ended at $(basename "$got")"; continue; }
    same_weights "$ref" "$got" || fail "$where: weights after resume (from step $left) differ from the uninterrupted run"
    tmps=("$d"/*.tmp)
    [[ ${#tmps[@]} -eq 0 ]] || fail "$where: temporary files left after the resumed run: ${tmps[*]##*/}"
    pass "SIG$sig at step ≥ $step + $ms ms (exit $st, newest complete checkpoint: step $left): resume = uninterrupted run"
done

# torn newest checkpoint: stop a run half-way, truncate its newest checkpoint, resume
d="$T/torn"
resume= signal_at TERM $((steps / 2)) 0 "$d"
newest=$(newest_ckpt "$d")
n=$(ls "$d"/ckpt-*.tfc | wc -l)
if [[ -z $newest || $n -lt 2 ]]; then
    fail "torn: need two checkpoints to test the fallback (have $n)"
else
    truncate -s $(( $(stat -c %s "$newest") / 2 )) "$newest"
    expect_status 0 "resume past a truncated newest checkpoint" -- "$TF" train "${common[@]}" --checkpoint "$d" --resume
    expect_err "$(basename "$newest")" "torn: the warning names the skipped file"
    grep -qiE "truncated|damaged" "$T/err" || fail "torn: the warning does not say why: $(head -2 "$T/err")"
    same_weights "$ref" "$(newest_ckpt "$d")" || fail "torn: weights after the fallback resume differ from the uninterrupted run"
    pass "truncated newest checkpoint: '$(grep -iE 'warning' "$T/err" | head -1 | sed "s|$T/||g")'; resume from the previous one = uninterrupted run"
fi

# every checkpoint damaged: a clear error, nothing trained from scratch silently
d="$T/allbad"
resume= signal_at TERM $((steps / 2)) 0 "$d"
for f in "$d"/ckpt-*.tfc; do truncate -s 100 "$f"; done
expect_status 1 "resume with every checkpoint damaged" -- "$TF" train "${common[@]}" --checkpoint "$d" --resume
expect_err "no valid checkpoint" "all damaged: clear error"
pass "every checkpoint damaged: '$(grep error "$T/err" | head -1 | sed "s|$T/||g")'"

# nohup: a SIGHUP ignored when the run starts stays ignored, and the run goes on to its end
d="$T/nohup"
(trap '' HUP; exec "$TF" train "${common[@]}" --checkpoint "$d" >/dev/null 2>"$T/kerr") &
pid=$!
while kill -0 $pid 2>/dev/null && (( $(newest_step "$d") < steps / 2 )); do sleep 0.005; done
kill -HUP $pid 2>/dev/null
wait $pid
st=$?
if [[ $st -ne 0 ]]; then
    fail "nohup: SIGHUP ignored at start stopped the run: exit $st: $(head -2 "$T/kerr")"
elif [[ $(basename "$(newest_ckpt "$d")") != $(basename "$ref") ]] || ! same_weights "$ref" "$(newest_ckpt "$d")"; then
    fail "nohup: the run did not end as the uninterrupted one"
else
    pass "SIGHUP ignored at start (nohup) stays ignored: the run finished, same weights"
fi
finish
