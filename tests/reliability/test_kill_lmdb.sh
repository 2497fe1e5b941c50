#!/usr/bin/env bash
# test_kill_lmdb.sh — kill -9 at random moments of `packdata pack --backend lmdb`: DST is absent
# or complete; `--resume` completes it; verify passes and the record stream (`fastload digest`,
# sequential) equals an uninterrupted pack's (the LMDB file itself may keep free pages of the
# aborted transaction, so bytes are not compared). 6 trials by default, 15 with FL_LONG_TESTS=1.
# FL_REL_SEED=S replays a run's kill delays (the seed is printed).
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$FLT"
if ((LONG)); then trials=15 images=20000; else trials=6 images=6000; fi
seed=${FL_REL_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$seed
echo "seed $seed (FL_REL_SEED=$seed replays these kill delays), $trials trials, $images images"
"$MKIDX" "$T/idx" $images || die "fixture"
args=(--backend lmdb --compress zstd:3 --no-dictionary --shuffle --seed 5 --workers 2 --quiet)
stream() { "$FLT" digest "$1" --order seq --batch 100 --workers 1 2>/dev/null | grep '^stream'; }

# reference run, timed: when DST.partial appears (tp) and when the pack ends (tref)
t0=$(date +%s%N)
"$P" pack "$T/idx" "$T/ref" "${args[@]}" 2>"$T/err" &
pid=$!
tp=
while kill -0 $pid 2>/dev/null; do
    [[ -z $tp && -e $T/ref.partial/data.mdb ]] && tp=$(( ($(date +%s%N) - t0) / 1000000 ))
    sleep 0.01
done
wait $pid || die "reference pack: $(cat "$T/err")"
tref=$(( ($(date +%s%N) - t0) / 1000000 ))
tp=${tp:-0}
want=$(stream "$T/ref")
[[ -n $want ]] || die "digest of the reference"
echo "reference: $tref ms, data.mdb from $tp ms"

absent=0 partial=0 complete=0
for ((i = 0; i < trials; i++)); do
    d="$T/k$i"
    # 1 in 4 before data.mdb appears, the rest while it is written (and up to 10% past the end)
    r=$(( RANDOM * 32768 + RANDOM ))
    if (( RANDOM % 4 == 0 )); then ms=$(( r % (tp + 1) )); else ms=$(( tp + r % ((tref - tp) * 11 / 10 + 1) )); fi
    "$P" pack "$T/idx" "$d" "${args[@]}" >/dev/null 2>"$T/kerr" &
    pid=$!
    sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    st=$?
    if [[ -e $d ]]; then
        [[ $st -eq 0 || $st -eq 137 ]] || fail "trial $i ($ms ms): exit $st"
        complete=$((complete + 1))
    else
        [[ $st -eq 137 ]] || { fail "trial $i ($ms ms): exit $st without DST"; continue; }
        [[ -e $d.partial ]] && partial=$((partial + 1)) || absent=$((absent + 1))
        expect_status 0 "trial $i ($ms ms): --resume" -- "$P" pack "$T/idx" "$d" "${args[@]}" --resume || continue
    fi
    [[ -d $d && ! -e $d.partial ]] || fail "trial $i: $d not published"
    expect_status 0 "trial $i ($ms ms): verify" -- "$P" verify "$d"
    [[ $(stream "$d") == "$want" ]] || fail "trial $i ($ms ms): records differ from the uninterrupted pack"
    rm -rf "$d" "$d.partial" "$d.partial.skips"
done
pass "LMDB: $trials kill -9 trials ($absent before DST.partial, $partial resumed, $complete complete): every result holds the uninterrupted pack's records"
finish
