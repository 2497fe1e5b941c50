#!/usr/bin/env bash
# test_untrusted_files.sh — what a careful tool does with files handed to it: a FIFO in place of
# manifest.json, a shard, a checkpoint (also a FIFO ckpt-99999999.tfc in the checkpoint folder)
# or an input image is refused at once ("not a regular file"), never waited on in open; a
# checkpoint declaring a 65,536 x 65,536 input (CRC fixed, so only the size is a lie) is refused
# by export, predict and eval as damaged or crafted instead of exported.
. "$(dirname "$0")/lib.sh"
need "$P" "$TF" "$FLT"
need_pil
export FASTLOAD_CPU_BACKEND="${FASTLOAD_CPU_BACKEND:-reference}"
"$PY" - "$T/src" <<'PY' || die "fixture"
import os, sys
from PIL import Image
for k in range(2):
    os.makedirs(os.path.join(sys.argv[1], "c%d" % k))
    for i in range(6):
        Image.new("RGB", (16, 16), (90 * k + 10 * i, 80, 120)).save(os.path.join(sys.argv[1], "c%d" % k, "%d.png" % i))
PY
"$P" pack "$T/src" "$T/ds" --compress none --quiet 2>"$T/err" || die "pack: $(cat "$T/err")"
"$TF" train --data "$T/ds" --val "$T/ds" --width 4 --batch 6 --epochs 1 --seed 1 --threads 2 --quiet \
    --checkpoint "$T/ck" >/dev/null 2>"$T/err" || die "train: $(cat "$T/err")"
CK=$(newest_ckpt "$T/ck")

# refused WHAT NEEDLE CMD...: exits non-zero within 20 s, saying NEEDLE
refused() {
    local what=$1 needle=$2
    shift 2
    timeout 20 "$@" >"$T/out" 2>"$T/err" </dev/null
    local rc=$?
    if [[ $rc -eq 124 ]]; then fail "$what: hung (killed after 20 s)"
    elif [[ $rc -eq 0 ]]; then fail "$what: exit 0"
    elif ! grep -q "$needle" "$T/err"; then fail "$what: lacks '$needle': $(head -2 "$T/err")"
    else pass "$what"; fi
}

cp -r "$T/ds" "$T/fm" && rm "$T/fm/manifest.json" && mkfifo "$T/fm/manifest.json"
refused "info: FIFO manifest" "not a regular file" "$P" info "$T/fm"
cp -r "$T/ds" "$T/fs" && rm "$T/fs/shard-00000.fls" && mkfifo "$T/fs/shard-00000.fls"
refused "fastload bench: FIFO shard" "not a regular file" "$FLT" bench "$T/fs" --epochs 1
refused "trainfast eval: FIFO shard" "not a regular file" "$TF" eval "$CK" "$T/fs"
mkfifo "$T/fifo.tfc"
refused "predict: FIFO checkpoint" "not a regular file" "$TF" predict "$T/fifo.tfc" "$T/ds"
mkdir "$T/ckf" && cp "$CK" "$T/ckf/" && mkfifo "$T/ckf/ckpt-99999999.tfc"
timeout 20 "$TF" eval "$T/ckf" "$T/ds" >"$T/out" 2>"$T/err" </dev/null
[[ $? -ne 124 ]] && pass "eval DIR with a FIFO ckpt-99999999.tfc: no hang ($(head -1 "$T/err"))" ||
    fail "eval DIR with a FIFO ckpt-99999999.tfc: hung"
timeout 20 "$TF" train --data "$T/ds" --val "$T/ds" --width 4 --batch 6 --epochs 2 --seed 1 --threads 2 \
    --quiet --checkpoint "$T/ckf" --resume >"$T/out" 2>"$T/err" </dev/null
[[ $? -ne 124 ]] && pass "train --resume with a FIFO ckpt-99999999.tfc: no hang" ||
    fail "train --resume with a FIFO ckpt-99999999.tfc: hung"
mkfifo "$T/img.png"
refused "predict: FIFO image" "regular\|FIFO\|cannot" "$TF" predict "$CK" "$T/img.png"

# a checkpoint whose header declares a 65,536 x 65,536 input, its CRC32C recomputed
"$PY" - "$CK" "$T/huge.tfc" <<'PY' || die "craft checkpoint"
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<ii", b, 56, 65536, 65536)  # in_h, in_w after magic, version, sizes, model, spec_id, in_c
t = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    t.append(c)
crc = 0xFFFFFFFF
for x in bytes(b[:-4]):
    crc = t[(crc ^ x) & 0xFF] ^ (crc >> 8)
struct.pack_into("<I", b, len(b) - 4, crc ^ 0xFFFFFFFF)
open(sys.argv[2], "wb").write(b)
PY
refused "export: 65,536 x 65,536 input" "damaged or crafted" "$TF" export "$T/huge.tfc" -o "$T/m.onnx"
[[ ! -e $T/m.onnx ]] || fail "export wrote $T/m.onnx"
refused "predict: 65,536 x 65,536 input" "damaged or crafted" "$TF" predict "$T/huge.tfc" "$T/ds"
refused "eval: 65,536 x 65,536 input" "damaged or crafted" "$TF" eval "$T/huge.tfc" "$T/ds"
finish
