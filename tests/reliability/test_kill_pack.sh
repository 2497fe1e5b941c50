#!/usr/bin/env bash
# test_kill_pack.sh — kill -9 at random points of `packdata pack` (a Fashion-MNIST-like IDX
# source, dictionary training, zstd, shuffled, 2 workers): after each kill DST is either absent
# or complete (verify passes, equal to an uninterrupted pack); `--resume` (itself killed once at
# random in every other trial) completes it, and the result is byte-identical to the
# uninterrupted pack (shards and manifest, all but the "created" time).
# 10 trials on 4,000 images with zstd:3 by default; FL_LONG_TESTS=1: 50 trials on 60,000 images
# with the default zstd:19. FL_REL_SEED=S replays a run's kill points (the seed is printed).
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX"
if ((LONG)); then trials=50 images=60000 level=19; else trials=10 images=4000 level=3; fi
sanitized && ((!LONG)) && trials=5
seed=${FL_REL_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$seed
echo "seed $seed (FL_REL_SEED=$seed replays these kill points), $trials trials, $images images, zstd:$level"
"$MKIDX" "$T/idx" $images || die "fixture"
args=(--compress zstd:$level --shard-size 256K --shuffle --seed 5 --workers 2 --quiet)

# reference run, timed: when DST.partial appears (tp) and when the pack ends (tref)
t0=$(date +%s%N)
"$P" pack "$T/idx" "$T/ref" "${args[@]}" 2>"$T/err" &
pid=$!
tp=
while kill -0 $pid 2>/dev/null; do
    [[ -z $tp && -e $T/ref.partial ]] && tp=$(( ($(date +%s%N) - t0) / 1000000 ))
    sleep 0.01
done
wait $pid || die "reference pack: $(cat "$T/err")"
tref=$(( ($(date +%s%N) - t0) / 1000000 ))
tp=${tp:-0}
nshards=$(ls "$T"/ref/*.fls | wc -l)
echo "reference: $nshards shards in $tref ms, DST.partial from $tp ms"

# Kill points are drawn by progress, not by time alone (the machine's load varies): either
# "t MS", a random moment before DST.partial appeared in the reference run, or "k K MS", MS ms
# after the K-th complete shard appears in DST.partial (K = 0..shards; K = shards reaches the
# manifest and the final rename).
shopt -s nullglob
point() {
    local r=$(( RANDOM * 32768 + RANDOM ))
    if (( RANDOM % 6 == 0 )); then echo "t $(( r % (tp + 1) ))"
    else echo "k $(( r % (nshards + 1) )) $(( RANDOM % 40 ))"; fi
}
reached() { # reached DST K: K complete shards in DST.partial, or DST published
    local f=("$1".partial/shard-*.fls)
    [[ -e $1 ]] || (( ${#f[@]} >= $2 ))
}
# kill_at POINT DST command...: run command, SIGKILL it at POINT; returns its exit status
kill_at() {
    local kind a b
    read -r kind a b <<<"$1"
    local d=$2
    shift 2
    "$@" >/dev/null 2>"$T/kerr" &
    local pid=$!
    if [[ $kind == t ]]; then
        sleep "$(printf '%d.%03d' $((a / 1000)) $((a % 1000)))"
    else
        while kill -0 $pid 2>/dev/null && ! reached "$d" "$a"; do sleep 0.005; done
        sleep "0.0$(printf '%02d' "$b")"
    fi
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
}

absent=0 complete=0 partial=0
for ((i = 0; i < trials; i++)); do
    d="$T/k$i"
    pt=$(point)
    kill_at "$pt" "$d" "$P" pack "$T/idx" "$d" "${args[@]}"
    st=$?
    if [[ -e $d ]]; then
        # the kill came after the rename (or the run ended first): DST must be complete
        [[ $st -eq 0 || $st -eq 137 ]] || fail "trial $i ($pt): exit $st"
        expect_status 0 "trial $i ($pt): verify of a DST present after the kill" -- "$P" verify "$d"
        msg=$(same_dataset "$T/ref" "$d") || fail "trial $i ($pt): DST present but not the complete dataset: $msg"
        [[ ! -e $d.partial ]] || fail "trial $i: both $d and $d.partial exist"
        complete=$((complete + 1))
    else
        [[ $st -eq 137 ]] || { fail "trial $i ($pt): exit $st without DST"; sed 's/^/    /' "$T/kerr" | head -3; }
        [[ -e $d.partial ]] && partial=$((partial + 1)) || absent=$((absent + 1))
        if ((i % 2)); then
            # kill the resume too, then resume again
            pt2=$(point)
            kill_at "$pt2" "$d" "$P" pack "$T/idx" "$d" "${args[@]}" --resume
            st=$?
            [[ $st -eq 0 || $st -eq 137 ]] || fail "trial $i: resume killed at ($pt2) exited $st: $(head -2 "$T/kerr")"
        fi
        if [[ ! -e $d ]]; then
            expect_status 0 "trial $i ($pt): --resume" -- "$P" pack "$T/idx" "$d" "${args[@]}" --resume
        fi
        [[ -d $d && ! -e $d.partial ]] || fail "trial $i: resume did not publish $d"
        expect_status 0 "trial $i: verify after resume" -- "$P" verify "$d"
        msg=$(same_dataset "$T/ref" "$d") || fail "trial $i ($pt): resumed dataset differs from the uninterrupted pack: $msg"
    fi
    rm -rf "$d" "$d.partial" "$d.partial.skips"
done
pass "$trials kill -9 trials: $absent before DST.partial existed, $partial with DST.partial (resumed), $complete after completion; every result = the uninterrupted pack"
finish
