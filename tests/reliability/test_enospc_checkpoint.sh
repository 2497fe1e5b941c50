#!/usr/bin/env bash
# test_enospc_checkpoint.sh — ENOSPC (injected by the LD_PRELOAD shim) while trainfast writes a
# checkpoint: exit 1 with a clear line naming the checkpoint file and the cause, no .tmp left,
# the previous checkpoints intact (they verify and evaluate), and `--resume` without the fault
# finishes with weights bit-identical to an uninterrupted run. Also: the write fails in the very
# first checkpoint, and only the fsync fails (every byte written: a delayed ENOSPC).
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$TF"
need_preload
train_reference 2000 300 2 "$T/ref"
ref=$(newest_ckpt "$T/ref")
size=$(stat -c %s "$ref")
[[ $size -gt 1000 ]] || die "reference checkpoint too small ($size bytes)"

# budget: 2.4 checkpoints (the 3rd write is short), 3 exactly (3rd fsync fails), 0.5 (the first)
for case in "$((size * 2 + size * 2 / 5)):short write in the 3rd" "$((size * 3)):fsync of the 3rd" \
            "$((size / 2)):short write in the 1st"; do
    budget=${case%%:*} what=${case#*:}
    d="$T/c$budget"
    rm -f "$T/report"
    expect_status 1 "$what: trainfast exit" -- with_faults FL_FAULT_PATH="$d/" \
        FL_FAULT_ENOSPC_AFTER=$budget FL_FAULT_REPORT="$T/report" -- "$TF" train "${common[@]}" --checkpoint "$d"
    errline=$(grep error: "$T/err" | head -1 | sed "s|$T/||g")
    grep -q '^ENOSPC' "$T/report" 2>/dev/null || { fail "$what: the fault never fired"; continue; }
    expect_err "No space left on device" "$what: the error names the cause"
    expect_err "$(basename "$d")/ckpt-" "$what: the error names the checkpoint file"
    ls "$d"/*.tmp >/dev/null 2>&1 && fail "$what: a .tmp file is left in $d"
    n=$(ls "$d"/ckpt-*.tfc 2>/dev/null | wc -l)
    if [[ $budget -ge $size ]]; then
        [[ $n -ge 1 ]] || { fail "$what: no earlier checkpoint left"; continue; }
        for f in "$d"/ckpt-*.tfc; do
            "$TF" eval "$f" "$T/data/val" >/dev/null 2>"$T/e2" || fail "$what: earlier checkpoint $(basename "$f") does not verify: $(cat "$T/e2")"
        done
    else
        [[ $n -eq 0 ]] || fail "$what: $n checkpoints after the first write failed"
    fi
    expect_status 0 "$what: --resume without the fault" -- "$TF" train "${common[@]}" --checkpoint "$d" --resume
    got=$(newest_ckpt "$d")
    [[ $(basename "$got") == $(basename "$ref") ]] || fail "$what: resumed run ended at $(basename "$got"), not $(basename "$ref")"
    same_weights "$ref" "$got" || fail "$what: resumed weights differ from the uninterrupted run"
    pass "ENOSPC, $what ($n earlier checkpoints kept): '$errline'; resume = uninterrupted run"
done
finish
