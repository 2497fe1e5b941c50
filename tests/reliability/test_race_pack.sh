#!/usr/bin/env bash
# test_race_pack.sh — packs racing to one DST. N=4 `packdata pack` runs
# (each with its own --seed) start at once, without and then with --force (over an existing
# dataset). Without --force exactly one succeeds; with --force at least one; every loser fails
# cleanly: exit 2 "DST is being written by process N" (or, without --force, exit 1 "already
# exists" when it came after the winner). After every trial DST verifies and is byte-identical
# to the uninterrupted pack of one of the runs that exited 0, nothing is left beside it
# (DST.partial, DST.lock, DST.old-*), and no run told the user to --resume a DST.partial.
# Also: a held lock names its holder's pid; a stale DST.lock (its writer killed) never blocks.
# 20 trials per mode by default; FL_LONG_TESTS=1: 200.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX"
if ((LONG)); then trials=200; else trials=20; fi
sanitized && ((!LONG)) && trials=5
N=4
"$MKIDX" "$T/idx" 2000 >/dev/null || die "fixture"
args=(--compress none --shard-size 128K --shuffle --quiet)
for k in $(seq 1 $N); do
    "$P" pack "$T/idx" "$T/ref$k" "${args[@]}" --seed $k 2>"$T/err" || die "reference $k: $(cat "$T/err")"
done

# a held lock: the message names the holder; nothing is touched
"$P" pack "$T/idx" "$T/held" "${args[@]}" --seed 1 2>"$T/err" || die "pack held: $(cat "$T/err")"
echo $$ >"$T/held.lock"
exec 9>>"$T/held.lock"
flock -n 9 || die "cannot lock $T/held.lock"
expect_status 2 "a locked DST" -- "$P" pack "$T/idx" "$T/held" "${args[@]}" --seed 2 --force &&
    expect_err "$T/held is being written by process $$" "the holder's pid is named"
same_dataset "$T/ref1" "$T/held" >/dev/null || fail "a refused run changed the locked dataset"
exec 9>&-
# a stale lock file (its writer was killed): no refusal, and it is gone afterwards
echo 999999 >"$T/held.lock"
expect_status 0 "a stale DST.lock" -- "$P" pack "$T/idx" "$T/held" "${args[@]}" --seed 2 --force
[[ ! -e $T/held.lock ]] || fail "DST.lock left after a successful run"
msg=$(same_dataset "$T/ref2" "$T/held") || fail "after a stale lock: $msg"
pass "a held lock names its holder; a stale lock file does not block"

race() { # race MODE TRIAL: N packs at once; MODE is plain or force
    local mode=$1 i=$2 d="$T/ds" k pids=() st ok=0 winners=() extra=()
    rm -rf "$d" "$d".*
    if [[ $mode == force ]]; then
        cp -r "$T/ref1" "$d"
        extra=(--force)
    fi
    for k in $(seq 1 $N); do
        "$P" pack "$T/idx" "$d" "${args[@]}" --seed $k "${extra[@]}" >"$T/o$k" 2>"$T/e$k" &
        pids[k]=$!
    done
    for k in $(seq 1 $N); do
        wait ${pids[k]}
        st=$?
        if ((st == 0)); then
            ok=$((ok + 1))
            winners+=($k)
        elif ((st == 2)) && grep -q "$d is being written by process [0-9]" "$T/e$k"; then
            :
        elif ((st == 1)) && [[ $mode == plain ]] && grep -q "$d already exists" "$T/e$k"; then
            :
        else
            fail "$mode trial $i: run $k exited $st: $(head -c 300 "$T/e$k")"
        fi
        if grep -q -- "--resume" "$T/e$k" && [[ ! -e $d.partial ]]; then
            fail "$mode trial $i: run $k hints at --resume of a $d.partial that does not exist: $(head -c 300 "$T/e$k")"
        fi
    done
    if [[ $mode == plain ]]; then
        ((ok == 1)) || fail "plain trial $i: $ok runs succeeded, want exactly 1"
    else
        ((ok >= 1)) || fail "force trial $i: no run succeeded"
    fi
    "$P" verify "$d" >/dev/null 2>"$T/verr" || fail "$mode trial $i: verify after the race: $(head -c 300 "$T/verr")"
    local same=0
    for k in "${winners[@]}"; do same_dataset "$T/ref$k" "$d" >/dev/null && same=1; done
    ((same)) || fail "$mode trial $i: DST is none of the successful runs' datasets (winners: ${winners[*]})"
    local left
    left=$(cd "$T" && ls -d ds.* 2>/dev/null)
    [[ -z $left ]] || fail "$mode trial $i: left beside DST: $left"
    RACE_OK=$ok
}

for mode in plain force; do
    total=0
    for ((i = 0; i < trials; i++)); do
        race $mode $i
        total=$((total + RACE_OK))
    done
    pass "$mode: $trials trials of $N racing packs, $total succeeded in all; every DST verified and equals a winner's pack"
done
finish
