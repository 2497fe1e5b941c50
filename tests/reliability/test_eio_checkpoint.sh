#!/usr/bin/env bash
# test_eio_checkpoint.sh — EIO (injected by the LD_PRELOAD shim) while trainfast reads a
# checkpoint: `eval` must fail naming the file and the I/O error (not call a healthy file
# damaged), and `--resume` must say why it passed over the unreadable newest checkpoint.
# Regression test of a finding (docs/RELIABILITY.md): tf_checkpoint_load used to ignore read(2)
# errors and parse the bytes it got, reporting EIO as "bad magic" (fixed in 964e38e).
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$TF"
need_preload
train_reference 1000 200 1 "$T/c"
newest=$(newest_ckpt "$T/c")
[[ -n $newest ]] || die "no checkpoint written"
name=$(basename "$newest")

expect_status 0 "eval without a fault" -- "$TF" eval "$newest" "$T/data/val"
expect_status 1 "eval with EIO" -- with_faults FL_FAULT_EIO_PATH="/c/$name" FL_FAULT_EIO_OFFSET=100 -- \
    "$TF" eval "$newest" "$T/data/val"
expect_err "$name" "eval: error names the file"
expect_err "Input/output error" "eval: error names the I/O error (got: $(grep error "$T/err" | head -1 | sed "s|$T/||g"))"

# resume over an unreadable newest checkpoint: falling back to the older one is fine, but the
# warning (or error) must name the I/O error
cp -a "$T/c" "$T/r"
with_faults FL_FAULT_EIO_PATH="/r/$name" FL_FAULT_EIO_OFFSET=100 -- \
    "$TF" train "${common[@]}" --checkpoint "$T/r" --resume >/dev/null 2>"$T/err"
grep -q "Input/output error" "$T/err" ||
    fail "resume over an unreadable checkpoint does not say it was an I/O error: $(grep -E 'error|warning' "$T/err" | head -2 | sed "s|$T/||g")"
finish
