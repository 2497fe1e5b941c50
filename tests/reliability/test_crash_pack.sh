#!/usr/bin/env bash
# test_crash_pack.sh — crash consistency of the writer's lifecycle: kill -9
# at random moments of (a) a pack, (b) a --resume of a killed pack, (c) a --force replacement of
# an existing dataset, (d) an LMDB pack. After every kill DST is absent, the old dataset
# (byte-identical, verify passes), or the complete new one (verify passes, equal to an
# uninterrupted pack); never anything else. Then the same command with --resume (plus --force
# for the replacement) finishes — the stale DST.lock the kill left never blocks it — and the
# result equals the uninterrupted pack, with nothing left beside DST (DST.partial, DST.lock,
# DST.old-*). Kill moments are uniform over the reference run's duration (FL_REL_SEED=S replays).
# 5 trials per kind by default; FL_LONG_TESTS=1: 50 per kind on a larger input.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$FLT"
if ((LONG)); then trials=50 images=20000; else trials=5 images=3000; fi
sanitized && ((!LONG)) && trials=2
seed=${FL_REL_SEED:-$(($(date +%s) % 100000))}
RANDOM=$seed
echo "seed $seed (FL_REL_SEED=$seed replays), $trials trials per kind, $images images"
"$MKIDX" "$T/idx" $images >/dev/null || die "fixture"
args=(--compress zstd:3 --shard-size 256K --shuffle --quiet)
largs=(--compress zstd:3 --backend lmdb --shuffle --seed 2 --quiet)

ms() { echo $(($(date +%s%N) / 1000000)); }
t0=$(ms)
"$P" pack "$T/idx" "$T/new" "${args[@]}" --seed 2 2>"$T/err" || die "reference: $(cat "$T/err")"
tref=$(($(ms) - t0))
"$P" pack "$T/idx" "$T/old" "${args[@]}" --seed 1 2>"$T/err" || die "old reference: $(cat "$T/err")"
t0=$(ms)
"$P" pack "$T/idx" "$T/lnew" "${largs[@]}" 2>"$T/err" || die "LMDB reference: $(cat "$T/err")"
tl=$(($(ms) - t0))
stream() { "$FLT" digest "$1" --order seq --batch 100 --workers 1 2>/dev/null | grep '^stream'; }
lstream=$(stream "$T/lnew")
[[ -n $lstream ]] || die "no digest of the LMDB reference"
echo "reference pack $tref ms, LMDB $tl ms"

# kill_at MS DST command...: run it, SIGKILL it after MS ms (if still running); its status in KST
kill_at() {
    local t=$1
    shift
    "$@" >/dev/null 2>"$T/kerr" &
    local pid=$!
    sleep "$(printf '%d.%03d' $((t / 1000)) $((t % 1000)))"
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    KST=$?
}
rnd() { echo $(((RANDOM * 32768 + RANDOM) % ($1 * 11 / 10 + 1))); }

# state KIND TRIAL DST: what the kill left must be absent / old / new
declare -A seen
state() {
    local what=$1 d=$3 got
    if [[ ! -e $d ]]; then
        got=absent
        [[ $what == force ]] && fail "$what trial $2: DST is gone (the old dataset must stay until the new one replaces it)"
    elif ! "$P" verify "$d" >/dev/null 2>"$T/verr"; then
        got=broken
        fail "$what trial $2: DST does not verify after the kill: $(head -c 300 "$T/verr")"
    elif [[ $what == lmdb ]]; then
        got=new
        [[ "$(stream "$d")" == "$lstream" ]] || { got=other; fail "$what trial $2: DST is not the LMDB reference"; }
    elif same_dataset "$T/new" "$d" >/dev/null; then
        got=new
    elif [[ $what == force ]] && same_dataset "$T/old" "$d" >/dev/null; then
        got=old
    else
        got=other
        fail "$what trial $2: DST verifies but is neither the old nor the new dataset"
    fi
    seen[$what-$got]=$((${seen[$what-$got]:-0} + 1))
}

# finish_it KIND TRIAL DST command...: the same command with --resume finishes the job
finish_it() {
    local what=$1 i=$2 d=$3
    shift 3
    expect_status 0 "$what trial $i: --resume after the kill" -- "$@" --resume || return
    if [[ $what == lmdb ]]; then
        [[ "$(stream "$d")" == "$lstream" ]] || fail "$what trial $i: resumed DST is not the LMDB reference"
    else
        local msg
        msg=$(same_dataset "$T/new" "$d") || fail "$what trial $i: resumed DST differs from the uninterrupted pack: $msg"
    fi
    expect_status 0 "$what trial $i: verify after --resume" -- "$P" verify "$d"
    local left
    left=$(cd "$(dirname "$d")" && ls -d "$(basename "$d")".* 2>/dev/null)
    [[ -z $left ]] || fail "$what trial $i: left beside DST: $left"
}

for ((i = 0; i < trials; i++)); do
    # (a) a pack
    d="$T/a$i"
    kill_at "$(rnd $tref)" "$P" pack "$T/idx" "$d" "${args[@]}" --seed 2
    state pack $i "$d"
    finish_it pack $i "$d" "$P" pack "$T/idx" "$d" "${args[@]}" --seed 2
    rm -rf "$d"
    # (b) a --resume of a killed pack, itself killed
    d="$T/b$i"
    kill_at "$(rnd $tref)" "$P" pack "$T/idx" "$d" "${args[@]}" --seed 2
    kill_at "$(rnd $tref)" "$P" pack "$T/idx" "$d" "${args[@]}" --seed 2 --resume
    [[ $KST -eq 0 || $KST -eq 137 ]] || fail "resume trial $i: the killed --resume exited $KST: $(head -c 300 "$T/kerr")"
    state resume $i "$d"
    finish_it resume $i "$d" "$P" pack "$T/idx" "$d" "${args[@]}" --seed 2
    rm -rf "$d"
    # (c) a --force replacement of an existing dataset
    d="$T/c$i"
    cp -a "$T/old" "$d"
    kill_at "$(rnd $tref)" "$P" pack "$T/idx" "$d" "${args[@]}" --seed 2 --force
    state force $i "$d"
    finish_it force $i "$d" "$P" pack "$T/idx" "$d" "${args[@]}" --seed 2 --force
    rm -rf "$d"
    # (d) an LMDB pack
    d="$T/d$i"
    kill_at "$(rnd $tl)" "$P" pack "$T/idx" "$d" "${largs[@]}"
    state lmdb $i "$d"
    finish_it lmdb $i "$d" "$P" pack "$T/idx" "$d" "${largs[@]}"
    rm -rf "$d"
done
summary=$(for k in "${!seen[@]}"; do echo "$k=${seen[$k]}"; done | sort | tr '\n' ' ')
pass "kill -9 x $trials per kind, DST after the kill: $summary; every --resume finished = the uninterrupted pack"
finish
