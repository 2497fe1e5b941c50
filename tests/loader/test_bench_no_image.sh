#!/usr/bin/env bash
# test_bench_no_image.sh — fastload bench and digest on a data set without an image (encoding
# none: tensors only): both run an epoch, bench names the encoding "none" in its text and --json.
set -u
B="${FL_BINARY_DIR:?FL_BINARY_DIR not set (run through ctest)}"
FLT="$B/tools/fastload/fastload"
MK="$B/tests/loader/fl_make_tensor_set"
for t in "$FLT" "$MK"; do [[ -x "$t" ]] || { echo "SKIP: $t not built"; exit 77; }; done
T="$(mktemp -d "${TMPDIR:-/tmp}/bench-noimage.XXXXXX")"
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
"$MK" "$T/ds" || { echo "FAIL: data set"; exit 1; }
"$FLT" bench "$T/ds" --batch 5 --workers 1 --epochs 1 >"$T/out" 2>"$T/err" || fail "bench: $(cat "$T/err")"
grep -q "10 records (none)" "$T/out" || fail "bench text does not say 'none': $(head -2 "$T/out")"
"$FLT" bench "$T/ds" --batch 5 --workers 1 --epochs 1 --json >"$T/j" 2>"$T/err" || fail "bench --json: $(cat "$T/err")"
/usr/bin/python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["dataset"]["encoding"]; sys.exit(e!="none")' "$T/j" ||
    fail "bench --json encoding: $(grep -o '"encoding":"[^"]*"' "$T/j")"
"$FLT" digest "$T/ds" --batch 5 --workers 1 --epochs 1 >"$T/d" 2>"$T/err" || fail "digest: $(cat "$T/err")"
[[ -s $T/d ]] || fail "digest printed nothing"
if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
echo "ok: bench (text, --json) and digest on a tensor-only set; encoding none"
exit 0
