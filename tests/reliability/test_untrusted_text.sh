#!/usr/bin/env bash
# test_untrusted_text.sh — names that came from a data set, a list or a checkpoint never drive
# the terminal: class and file names holding ESC, OSC, BEL and CR are printed with those bytes
# made visible (\x1b ...) by packdata info/extract, errors naming a path, trainfast predict; a
# class named like a spreadsheet formula is a text cell in predict --csv ("'=1+2...").
. "$(dirname "$0")/lib.sh"
need "$P" "$TF"
need_pil
export FASTLOAD_CPU_BACKEND="${FASTLOAD_CPU_BACKEND:-reference}"

"$PY" - "$T/src" <<'PY' || die "fixture images"
import os, sys
from PIL import Image
root = sys.argv[1]
names = ["t\x1b]0;owned\x07itle", "cr\rwrite", "=1+2*cmd|' -C calc'!A0", "bell\x07\x1b[2J"]
for k, c in enumerate(names):
    d = os.path.join(root, c)
    os.makedirs(d)
    for i in range(4):
        Image.new("RGB", (16, 16), (50 * k + 10 * i, 80, 120)).save(os.path.join(d, "%d\x1b[31m.png" % i))
PY

# clean WHAT FILE: FILE holds no ESC, BEL or CR byte, and shows at least one escape
clean() {
    if LC_ALL=C grep -q $'[\x1b\x07\r]' "$2"; then
        fail "$1: raw control characters printed: $(LC_ALL=C tr -c '[:print:]\n' '?' <"$2" | head -2)"
    elif ! grep -q '\\x1b\|\\x07\|\\x0d' "$2"; then
        fail "$1: no visible escape in: $(head -c 300 "$2")"
    else
        pass "$1"
    fi
}

"$P" pack "$T/src" "$T/ds" --compress none >/dev/null 2>"$T/err" || die "pack: $(cat "$T/err")"
"$P" info "$T/ds" >"$T/info" 2>&1 || fail "info exited $?"
clean "packdata info: class names" "$T/info"
"$P" extract "$T/ds" 0 -o "$T/x.png" >"$T/extract" 2>&1 || fail "extract exited $?"
clean "packdata extract: class and source names" "$T/extract"
"$P" info "$T/no"$'\x1b]0;x\x07'"such" >"$T/missing" 2>&1 && fail "info of a missing path exited 0"
clean "an error naming a path" "$T/missing"

"$TF" train --data "$T/ds" --val "$T/ds" --width 4 --batch 8 --epochs 1 --seed 1 --threads 2 --quiet \
    --checkpoint "$T/ck" >/dev/null 2>"$T/err" || die "train: $(cat "$T/err")"
CK=$(newest_ckpt "$T/ck")
"$TF" predict "$CK" "$T/ds" --top 4 >"$T/pred" 2>&1 || fail "predict exited $?"
clean "trainfast predict: class names" "$T/pred"
mapfile -d '' files < <(find "$T/src" -name '*.png' -print0 | sort -z)
"$TF" predict "$CK" "${files[@]:0:2}" --top 1 >"$T/predf" 2>&1 || fail "predict files exited $?"
clean "trainfast predict: file names" "$T/predf"
"$TF" predict "$CK" "$T/ds" --top 4 --csv "$T/p.csv" >/dev/null 2>"$T/err" || fail "predict --csv: $(cat "$T/err")"
if grep -q "\"'=1+2\*cmd|' -C calc'!A0\"" "$T/p.csv" && ! grep -q '\(^\|,\)=1+2' "$T/p.csv"; then
    pass "predict --csv: the formula-like class is a quoted text cell"
else
    fail "predict --csv: $(grep -m1 'calc' "$T/p.csv")"
fi
finish
