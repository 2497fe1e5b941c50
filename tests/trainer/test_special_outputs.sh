#!/usr/bin/env bash
# test_special_outputs.sh — trainfast's output files when PATH is not a regular file (the durable
# write of common/fl_file.h): `predict --logits /dev/null` discards and /dev/null stays a character
# device (as root it used to be replaced by a regular file); `predict --csv FIFO` feeds the FIFO's
# reader; `export -o SYMLINK` replaces the symlink's target and keeps the link;
# `train --report /proc/self/fd/1` writes the page to stdout; a directory as --logits is refused
# (exit 1, nothing replaced). Each exits 0 and leaves no .tmp beside the target.
set -u
B="${FL_BINARY_DIR:?}"
TF="$B/trainer/trainfast"
MK="$B/tests/trainer/tf_make_dataset"
T="$(mktemp -d "${TMPDIR:-/tmp}/tf_special.XXXXXX")"
trap 'rm -rf "$T"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:exitcode=86"
export FASTLOAD_CPU_BACKEND="${FASTLOAD_CPU_BACKEND:-reference}"
failed=0
fail() { echo "FAIL: $*"; failed=1; }
die() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/../lib/expect.sh"

"$MK" "$T/d" 200 8 8 1 4 1 >/dev/null && "$MK" "$T/v" 100 8 8 1 4 2 >/dev/null || die "fixture"
# train --report to stdout through /proc/self/fd/1 (a pipe here)
"$TF" train --data "$T/d" --val "$T/v" --width 4 --batch 50 --epochs 1 --seed 3 --threads 2 --quiet \
    --checkpoint "$T/ck" --report /proc/self/fd/1 >"$T/page" 2>"$T/err" || { cat "$T/err"; die "train --report /proc/self/fd/1"; }
grep -q "</html>" "$T/page" || fail "train --report /proc/self/fd/1: no page on stdout"
CK=$(ls "$T"/ck/ckpt-*.tfc | sort | tail -n 1)

# --logits /dev/null
expect_status 0 "predict --logits /dev/null" -- "$TF" predict "$CK" "$T/d" --logits /dev/null
[[ -c /dev/null ]] || die "/dev/null is no longer a character device"
[[ -e /dev/null.tmp ]] && fail "/dev/null.tmp left"

# --csv to a FIFO with a reader
mkfifo "$T/fifo"
(timeout 60 cat "$T/fifo" >"$T/fifo.out") &
reader=$!
expect_status 0 "predict --csv FIFO" -- timeout 60 "$TF" predict "$CK" "$T/d" --csv "$T/fifo"
wait $reader
[[ -p "$T/fifo" ]] || fail "the FIFO was replaced"
[[ $(head -n 1 "$T/fifo.out") == index,label,* ]] || fail "the FIFO's reader got no CSV header"
[[ $(wc -l <"$T/fifo.out") -eq 201 ]] || fail "the FIFO's reader got $(wc -l <"$T/fifo.out") lines, want 201"

# export -o a symlink: the target is replaced, the link stays
if "$TF" export --help 2>&1 | grep -q -- "--output"; then
    echo old >"$T/model.onnx"
    ln -s model.onnx "$T/link.onnx"
    expect_status 0 "export -o SYMLINK" -- "$TF" export "$CK" -o "$T/link.onnx"
    if [[ -s "$T/err" ]] && grep -q "export is not built\|without ONNX" "$T/err"; then
        echo "note: export not built, symlink case skipped"
    else
        [[ -L "$T/link.onnx" ]] || fail "export -o SYMLINK replaced the link"
        [[ $(stat -c %s "$T/model.onnx") -gt 100 ]] || fail "export -o SYMLINK: the target was not written"
        [[ -e "$T/link.onnx.tmp" || -e "$T/model.onnx.tmp" ]] && fail "export left a .tmp"
    fi
fi

# a directory as --logits: refused, the directory stays
mkdir "$T/adir"
expect_status 1 "predict --logits DIR" -- "$TF" predict "$CK" "$T/d" --logits "$T/adir"
expect_err "--logits $T/adir" "predict --logits DIR names the option and path"
[[ -d "$T/adir" ]] || fail "the directory was replaced"

[[ $failed -eq 0 ]] && echo "ok: /dev/null, FIFO, symlink, /proc/self/fd/1 written in place or through their target; a directory refused"
exit $failed
