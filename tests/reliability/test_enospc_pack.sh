#!/usr/bin/env bash
# test_enospc_pack.sh — ENOSPC (injected by the LD_PRELOAD shim) at several points of
# `packdata pack`: exit 1 with one clear line naming the file and "No space left on device",
# nothing at DST (or an earlier complete DST untouched, with --force), the complete shards kept
# in DST.partial; then `--resume` without the fault completes, `verify` passes and the result is
# byte-identical to an uninterrupted pack. Shards and LMDB backends.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$FLT"
need_preload
"$MKIDX" "$T/idx" 3000 || die "fixture"
args=(--compress zstd:3 --shard-size 256K --quiet)

# reference: uninterrupted pack, through the shim with a budget it never reaches, which measures
# the bytes a pack writes into DST.partial (dictionary, state, plan, shards, manifest). The shim
# matches paths by substring: count only DST.partial, not the lock file DST.lock beside it, which
# holds the writer's pid (one digit more or less between runs shifted the budgets, and the
# "exactly all the bytes" case then packed without a fault: a flaky failure under load).
with_faults FL_FAULT_PATH="$T/ref.partial" FL_FAULT_ENOSPC_AFTER=$((1 << 40)) FL_FAULT_REPORT="$T/wr" -- \
    "$P" pack "$T/idx" "$T/ref" "${args[@]}" 2>"$T/err" || die "reference pack: $(cat "$T/err")"
total=$(sed -n 's/^WRITTEN //p' "$T/wr")
msize=$(stat -c %s "$T/ref/manifest.json")
nshards=$(ls "$T"/ref/*.fls | wc -l)
[[ $nshards -ge 4 ]] || die "reference should have several shards (has $nshards)"
[[ $total -gt 0 ]] || die "the shim measured no bytes written"

# budgets: the first write, inside the dictionary, mid-run, inside the manifest, and exactly all
# the bytes (every write succeeds, the last fsync fails: a delayed ENOSPC)
for budget in 0 5000 $((total / 2)) $((total - msize / 2)) $total; do
    d="$T/out$budget"
    rm -f "$T/report"
    expect_status 1 "ENOSPC after $budget bytes" -- with_faults FL_FAULT_PATH="$d.partial" \
        FL_FAULT_ENOSPC_AFTER=$budget FL_FAULT_REPORT="$T/report" -- "$P" pack "$T/idx" "$d" "${args[@]}"
    errline=$(grep error: "$T/err" | head -1 | sed "s|$T/||g")
    grep -q '^ENOSPC' "$T/report" 2>/dev/null || { fail "budget $budget: the fault never fired"; continue; }
    expect_err "No space left on device" "budget $budget: error names the cause"
    expect_err "$(basename "$d").partial/" "budget $budget: error names the file"
    grep -q "error:" "$T/err" || fail "budget $budget: no 'error:' line"
    [[ ! -e $d ]] || fail "budget $budget: $d exists after a failed pack"
    expect_status 0 "budget $budget: --resume without the fault" -- "$P" pack "$T/idx" "$d" "${args[@]}" --resume
    [[ -d $d && ! -e $d.partial ]] || fail "budget $budget: resume did not publish $d"
    expect_status 0 "budget $budget: verify after resume" -- "$P" verify "$d"
    msg=$(same_dataset "$T/ref" "$d") || fail "budget $budget: resumed dataset differs from the reference: $msg"
    pass "ENOSPC after $budget bytes in $(grep '^ENOSPC' "$T/report" | sed 's|.*/||' | head -1): '$errline', resume = reference"
done

# an earlier complete DST survives a failing --force replacement
cp -a "$T/ref" "$T/old"
expect_status 1 "ENOSPC during --force" -- with_faults FL_FAULT_PATH="$T/old" \
    FL_FAULT_ENOSPC_AFTER=$((total / 3)) -- "$P" pack "$T/idx" "$T/old" "${args[@]}" --shuffle --seed 3 --force
expect_err "No space left on device" "--force: error names the cause"
msg=$(same_dataset "$T/ref" "$T/old") || fail "--force + ENOSPC changed the earlier dataset: $msg"
expect_status 0 "verify the earlier dataset" -- "$P" verify "$T/old"
pass "ENOSPC during --force leaves the earlier complete dataset untouched"

# LMDB backend: the same promise (LMDB turns a short write into EIO: the message still names
# DST.partial/data.mdb)
# (the LMDB file of a resumed run may keep free pages of the aborted transaction: compare the
# record stream, not the bytes)
stream() { "$FLT" digest "$1" --order seq --batch 100 --workers 1 | grep '^stream'; }
largs=(--compress zstd:3 --backend lmdb --quiet)
"$P" pack "$T/idx" "$T/lref" "${largs[@]}" 2>"$T/err" || die "LMDB reference pack: $(cat "$T/err")"
ltotal=$(cat "$T"/lref/* | wc -c)
for budget in 0 $((ltotal / 2)); do
    d="$T/lmdb$budget"
    rm -f "$T/report"
    expect_status 1 "LMDB: ENOSPC after $budget bytes" -- with_faults FL_FAULT_PATH="$d" \
        FL_FAULT_ENOSPC_AFTER=$budget FL_FAULT_REPORT="$T/report" -- "$P" pack "$T/idx" "$d" "${largs[@]}"
    errline=$(grep error: "$T/err" | head -1 | sed "s|$T/||g")
    grep -q '^ENOSPC' "$T/report" 2>/dev/null || { fail "LMDB budget $budget: the fault never fired"; continue; }
    expect_err "$(basename "$d")" "LMDB budget $budget: error names the dataset"
    [[ ! -e $d ]] || fail "LMDB budget $budget: $d exists after a failed pack"
    expect_status 0 "LMDB budget $budget: --resume" -- "$P" pack "$T/idx" "$d" "${largs[@]}" --resume
    expect_status 0 "LMDB budget $budget: verify" -- "$P" verify "$d"
    [[ $(stream "$d") == $(stream "$T/lref") ]] || fail "LMDB budget $budget: records differ from the reference"
    pass "LMDB: ENOSPC after $budget bytes in $(grep '^ENOSPC' "$T/report" | sed 's|.*/||' | head -1): '$errline', resume verifies"
done
finish
