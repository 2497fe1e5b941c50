#!/usr/bin/env bash
# test_output_full.sh — a result that could not be written is a failure: every --json, --report
# and stdout result of packdata and fastload, sent to a full device (/dev/full, ENOSPC on every
# write), exits 1 with one line naming what could not be written — never an empty file and exit 0.
. "$(dirname "$0")/lib.sh"
need "$P" "$FLT" "$MKIDX"
[[ -w /dev/full ]] || skip "/dev/full not writable here"
"$MKIDX" "$T/idx" 300 >/dev/null || die "fixture"
"$P" pack "$T/idx" "$T/ds" --compress none --quiet 2>"$T/err" || die "pack: $(cat "$T/err")"

# full_out WHAT WANT -- command...: stdout to /dev/full; exit 1 and stderr naming WANT
full_out() {
    local what=$1 want=$2
    shift 3
    "$@" >/dev/full 2>"$T/err"
    local got=$?
    if [[ $got -ne 1 ]]; then
        fail "$what > /dev/full: exit $got, want 1"
        sed 's/^/    /' "$T/err" | head -3
        return
    fi
    # the reason: ENOSPC, or (when the failing write was an earlier, buffered one) that it failed
    grep -qF -- "$want" "$T/err" && grep -qE "No space left on device|an earlier write failed" "$T/err" &&
        pass "$what > /dev/full: exit 1, $(grep -F -- "$want" "$T/err" | head -1)" ||
        { fail "$what: stderr lacks '$want' and the reason"; sed 's/^/    /' "$T/err" | head -3; }
}

rm -rf "$T/ds2"
full_out "pack --json" "stdout" -- "$P" pack "$T/idx" "$T/ds2" --compress none --quiet --json
[[ -f $T/ds2/manifest.json ]] && pass "the data set itself was packed" || fail "pack --json > /dev/full left no data set"
full_out "packdata info --json" "stdout" -- "$P" info "$T/ds" --json
full_out "packdata info" "stdout" -- "$P" info "$T/ds"
full_out "packdata verify --json" "stdout" -- "$P" verify "$T/ds" --json
full_out "fastload digest" "stdout" -- "$FLT" digest "$T/ds"
full_out "fastload bench --json" "stdout" -- "$FLT" bench "$T/ds" --epochs 1 --json
full_out "packdata --help" "stdout" -- "$P" --help

# --report FILE on a full device: an image folder with one bad input, skipped and reported
if /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
    mkdir -p "$T/img/a" "$T/img/b"
    /usr/bin/python3 - "$T/img" <<'PY' || die "fixture images"
import sys
from PIL import Image
for c in "ab":
    for i in range(3):
        Image.new("RGB", (16, 16), (i * 40, 80, 120)).save(f"{sys.argv[1]}/{c}/{i}.png")
open(f"{sys.argv[1]}/a/bad.png", "wb").write(b"not a png")
PY
    "$P" pack "$T/img" "$T/dsi" --on-error skip --report /dev/full --quiet 2>"$T/err"
    got=$?
    if [[ $got -eq 1 ]] && grep -qF -- "--report /dev/full" "$T/err"; then
        pass "pack --report /dev/full: exit 1, $(grep -F -- '--report' "$T/err" | head -1)"
    else
        fail "pack --report /dev/full: exit $got, want 1 naming --report"
        sed 's/^/    /' "$T/err" | head -3
    fi
else
    echo "note: no PIL for /usr/bin/python3: --report case not run"
fi
finish
