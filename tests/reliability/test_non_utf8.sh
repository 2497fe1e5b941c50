#!/usr/bin/env bash
# test_non_utf8.sh — class folders and file names whose bytes are not UTF-8 (a Latin-1 file
# system, a Windows share) still give valid JSON everywhere a name is written: manifest.json,
# pack/info/verify --json, trainfast predict --json and the ONNX metadata. Such bytes are written
# as \u00XX (their Latin-1 reading; common/fl_json.c): "caf\xe9" reads back as "café".
. "$(dirname "$0")/lib.sh"
need "$P" "$TF"
need_pil
export FASTLOAD_CPU_BACKEND="${FASTLOAD_CPU_BACKEND:-reference}"

"$PY" - "$T/src" <<'PY' || die "fixture images"
import os, sys
from PIL import Image
root = os.fsencode(sys.argv[1])
for k, c in enumerate([b"caf\xe9", b"ok", b"b\xff\xfe"]):
    d = os.path.join(root, c)
    os.makedirs(d)
    for i in range(6):
        name = b"img\xe0%d.png" % i if c == b"ok" and i == 0 else b"%d.png" % i
        Image.new("RGB", (16, 16), (40 * k + 10 * i, 80, 120)).save(os.path.join(d, name).decode("utf-8", "surrogateescape"))
PY

# valid_json WHAT FILE [PYTHON-EXPRESSION over j]: FILE is one JSON text (or JSON lines) and the check holds
valid_json() {
    local what=$1 f=$2 check=${3:-True}
    if "$PY" - "$f" "$check" <<'PY' 2>"$T/pyerr"; then
import json, sys
raw = open(sys.argv[1], "rb").read()
text = raw.decode("utf-8")  # strict: a JSON text must be UTF-8
lines = [l for l in text.splitlines() if l.strip()]
try:
    docs = [json.loads(text)]
except ValueError:
    docs = [json.loads(l) for l in lines]
j = docs[0]
assert eval(sys.argv[2]), "check failed: " + sys.argv[2]
PY
        pass "$what: valid JSON"
    else
        fail "$what: $(tail -1 "$T/pyerr")"
    fi
}

classes='sorted(j["classes"]) == sorted(["caf\u00e9", "ok", "b\u00ff\u00fe"])'
"$P" pack "$T/src" "$T/ds" --compress none --json >"$T/pack.json" 2>"$T/err" || die "pack: $(cat "$T/err")"
valid_json "pack --json" "$T/pack.json"
valid_json "manifest.json" "$T/ds/manifest.json" "$classes"
"$P" info "$T/ds" --json >"$T/info.json" 2>"$T/err" || fail "info --json: $(cat "$T/err")"
valid_json "info --json" "$T/info.json" "$classes"
"$P" verify "$T/ds" --json >"$T/verify.json" 2>"$T/err" || fail "verify --json: $(cat "$T/err")"
valid_json "verify --json" "$T/verify.json"
expect_status 0 "--resume of the finished pack (names read back from the manifest)" -- \
    "$P" pack "$T/src" "$T/ds" --compress none --resume

"$TF" train --data "$T/ds" --val "$T/ds" --width 4 --batch 6 --epochs 1 --seed 1 --threads 2 --quiet \
    --checkpoint "$T/ck" >/dev/null 2>"$T/err" || die "train: $(cat "$T/err")"
CK=$(newest_ckpt "$T/ck")
"$TF" predict "$CK" "$T/ds" --json --top 3 >"$T/pred.json" 2>"$T/err" || fail "predict --json: $(cat "$T/err")"
valid_json "predict --json (packed)" "$T/pred.json"
mapfile -d '' files < <(find "$T/src" -name '*.png' -print0 | sort -z)
"$TF" predict "$CK" "${files[@]}" --json >"$T/predf.json" 2>"$T/err" || fail "predict --json files: $(cat "$T/err")"
valid_json "predict --json (files with non-UTF-8 names)" "$T/predf.json"
"$TF" eval "$CK" "$T/ds" --json >"$T/eval.json" 2>"$T/err" || fail "eval --json: $(cat "$T/err")"
valid_json "eval --json" "$T/eval.json"

if "$PY" -c 'import onnx' 2>/dev/null; then
    if "$TF" export "$CK" -o "$T/m.onnx" >/dev/null 2>"$T/err"; then
        "$PY" - "$T/m.onnx" <<'PY' 2>"$T/pyerr" && pass "ONNX metadata: valid JSON, class names kept" || fail "ONNX metadata: $(tail -1 "$T/pyerr")"
import json, sys, onnx
m = onnx.load(sys.argv[1])
meta = {p.key: p.value for p in m.metadata_props}
c = json.loads(meta["classes"])
assert sorted(c) == sorted(["caf\u00e9", "ok", "b\u00ff\u00fe"]), c
PY
    else
        grep -q "without\|not built\|protobuf" "$T/err" && echo "note: export not built here: $(head -1 "$T/err")" ||
            fail "export: $(head -2 "$T/err")"
    fi
else
    echo "note: $PY has no onnx: ONNX metadata not checked"
fi
finish
