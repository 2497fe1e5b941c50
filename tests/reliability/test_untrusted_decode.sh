#!/usr/bin/env bash
# test_untrusted_decode.sh — decompression bombs against the loader's shared decode-memory
# budget (the decode_memory option, `fastload bench/digest --decode-memory`):
#  (a) 5,000 x 5,000 PNG and lossless WebP bombs (84 KB and 1 KB files) decoded by 8 workers
#      under a 256 MiB budget: the process's peak RSS stays under the budget + the documented
#      slack (8 workers x 17 MiB) + the same run's baseline on small images, and the loader
#      never reserves more than the budget (before: every worker kept its own bomb, ~640 MB);
#  (b) the same digest with and without a budget, whatever the worker count, on a set of normal
#      and medium images (the medium ones reserve and wait under a small budget);
#  (c) an image larger than the whole budget: exit 1, the message names the shard, the record,
#      the image's size and the budget, the same with 1 and 8 workers, no hang;
#  (d) 16 workers and a budget that holds exactly one image: two epochs finish (no deadlock);
#  and the Python Loader's decode_memory keyword.
. "$(dirname "$0")/lib.sh"
need "$P" "$FLT"
PY=/usr/bin/python3
"$PY" -c 'import PIL.Image, PIL.features; assert PIL.features.check("webp")' 2>/dev/null ||
    skip "$PY lacks PIL with WebP"
"$PY" - "$T" <<'PY' || die "fixture"
import os, shutil, sys
from PIL import Image
t = sys.argv[1]
def mk(d):
    os.makedirs(os.path.join(t, d), exist_ok=True)
    return os.path.join(t, d)
# bombs: one constant 5000 x 5000 image as PNG (zlib level 9) and lossless WebP, copied
b = mk("bombs/a")
Image.new("RGB", (5000, 5000), (10, 20, 30)).save(os.path.join(b, "p0.png"), compress_level=9)
Image.new("RGB", (5000, 5000), (10, 20, 30)).save(os.path.join(b, "w0.webp"), lossless=True)
for i in range(1, 4):
    shutil.copy(os.path.join(b, "p0.png"), os.path.join(b, "p%d.png" % i))
    shutil.copy(os.path.join(b, "w0.webp"), os.path.join(b, "w%d.webp" % i))
# small bombs for the deadlock case: 2000 x 2000 PNGs (about 12 MB each to decode)
s = mk("small_bombs/a")
Image.new("RGB", (2000, 2000), (200, 20, 30)).save(os.path.join(s, "p0.png"), compress_level=9)
for i in range(1, 6):
    shutil.copy(os.path.join(s, "p0.png"), os.path.join(s, "p%d.png" % i))
# a normal set: small JPEGs and PNGs (no reservation) and 700 x 600 ones (about 1.3 MB each)
for k in range(2):
    d = mk("normal/c%d" % k)
    for i in range(12):
        w, h = (700, 600) if i % 4 == 0 else (40 + 13 * i, 30 + 7 * i)
        im = Image.new("RGB", (w, h), (20 * i, 100 * k, 7 * i))
        for x in range(0, w, 9):
            im.putpixel((x, (x * 7 + i) % h), (255, 255 - x % 256, x % 256))
        im.save(os.path.join(d, "%d.%s" % (i, "png" if i % 2 == 0 else "jpg")))
PY
for s in bombs small_bombs normal; do
    "$P" pack "$T/$s" "$T/$s.ds" --encode keep --quiet 2>"$T/err" || die "pack $s: $(cat "$T/err")"
done

# json FILE KEY: a top-level number of a bench --json object
json() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# (a) peak RSS under 8 workers
RUN=(--workers 8 --batch 1 --size 32 --order seq --json --quiet)
timeout 120 "$FLT" bench "$T/normal.ds" "${RUN[@]}" >"$T/base.json" 2>"$T/err" ||
    die "baseline bench: $(head -3 "$T/err")"
timeout 300 "$FLT" bench "$T/bombs.ds" "${RUN[@]}" --decode-memory 256M >"$T/a.json" 2>"$T/err"
rc=$?
if [[ $rc -ne 0 ]]; then
    fail "(a) bench under a 256 MiB budget: exit $rc: $(head -3 "$T/err")"
else
    base=$(json "$T/base.json" peak_rss_mib)
    peak=$(json "$T/a.json" peak_rss_mib)
    reserved=$(json "$T/a.json" decode_memory_peak)
    bound=$("$PY" -c "print(256 + 8 * 17 + $base)")
    if sanitized; then
        pass "(a) sanitized build: peak RSS $peak MiB not checked (ASan's shadow and quarantine)"
    elif "$PY" -c "import sys; sys.exit(not ($peak <= $bound))"; then
        pass "(a) 8 bombs, 8 workers, 256 MiB budget: peak RSS $peak MiB <= $bound MiB (baseline $base)"
    else
        fail "(a) peak RSS $peak MiB over budget + slack + baseline = $bound MiB"
    fi
    if [[ $reserved -le $((256 << 20)) && $reserved -gt $((64 << 20)) ]]; then
        pass "(a) at most $((reserved >> 20)) MiB reserved at once"
    else
        fail "(a) decode_memory_peak $reserved outside (64 MiB, 256 MiB]"
    fi
fi

# (b) the same batches with and without a budget, any worker count
digest() { timeout 120 "$FLT" digest "$T/normal.ds" --size 48 --batch 5 "$@" 2>"$T/err" | tail -n 1; }
ref=$(digest --workers 1 --decode-memory unlimited)
[[ $ref == stream* ]] || die "(b) digest: $(head -3 "$T/err")"
for args in "--workers 3" "--workers 4 --decode-memory 2M" "--workers 8 --decode-memory 1600K"; do
    # shellcheck disable=SC2086
    got=$(digest $args)
    [[ $got == "$ref" ]] && pass "(b) digest $args" || fail "(b) digest $args: $got != $ref"
done
ref=$(digest --workers 1 --augment rrc,flip --seed 3 --decode-memory unlimited)
got=$(digest --workers 5 --augment rrc,flip --seed 3 --decode-memory 1600K)
[[ $got == "$ref" && $ref == stream* ]] && pass "(b) digest rrc,flip under a 1600 KiB budget" ||
    fail "(b) digest rrc,flip: $got != $ref"

# (c) one image needs more than the whole budget
for w in 1 8; do
    timeout 60 "$FLT" bench "$T/bombs.ds" --workers $w --batch 1 --size 32 --order seq --quiet \
        --decode-memory 64M >"$T/out" 2>"$T/err.$w"
    rc=$?
    if [[ $rc -eq 124 ]]; then fail "(c) $w workers: hung"
    elif [[ $rc -ne 1 ]]; then fail "(c) $w workers: exit $rc, want 1"
    elif ! grep -q "shard-00000.fls: record 0: decoding its 5000x5000 PNG image needs .* MiB, more than the loader's decode memory budget (64.0 MiB" "$T/err.$w"; then
        fail "(c) $w workers: message: $(head -2 "$T/err.$w")"
    else pass "(c) $w workers: $(grep -o 'record 0: .*' "$T/err.$w" | head -1)"; fi
done
cmp -s "$T/err.1" "$T/err.8" && pass "(c) the same message with 1 and 8 workers" ||
    fail "(c) messages differ: $(cat "$T/err.1" "$T/err.8")"

# (d) a budget that fits exactly one 2000 x 2000 image (about 12 MB: two do not fit), 16 workers
timeout 120 "$FLT" bench "$T/small_bombs.ds" --workers 16 --batch 3 --size 32 --epochs 3 --json \
    --quiet --decode-memory 16M >"$T/d.json" 2>"$T/err"
rc=$?
if [[ $rc -eq 124 ]]; then fail "(d) 16 workers, one image at a time: hung (killed after 120 s)"
elif [[ $rc -ne 0 ]]; then fail "(d) exit $rc: $(head -3 "$T/err")"
else
    reserved=$(json "$T/d.json" decode_memory_peak)
    [[ $reserved -gt $((8 << 20)) && $reserved -le $((16 << 20)) ]] &&
        pass "(d) 16 workers, 18 decodes of one image at a time ($((reserved >> 20)) MiB reserved at most)" ||
        fail "(d) decode_memory_peak $reserved outside (8 MiB, 16 MiB]"
fi

# the Python keyword
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
PRELOAD=()
if sanitized; then # an ASan libfastload.so in an uninstrumented python needs the runtime first
    PRELOAD=(LD_PRELOAD="$(${CC:-cc} -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
fi
if "$PY" -c 'import numpy' 2>/dev/null && [[ -f $B/libfastload.so ]]; then
    env "${PRELOAD[@]}" FASTLOAD_LIBRARY="$B/libfastload.so" PYTHONPATH="$SRC/python" \
        timeout 120 "$PY" - "$T" <<'PY' >"$T/py" 2>&1
import sys, fastload
t = sys.argv[1]
with fastload.Loader(t + "/small_bombs.ds", batch_size=2, size=32, workers=4,
                     decode_memory=16 << 20) as L:
    for _ in L:
        pass
    s = L.stats()
    assert 8 << 20 < s["decode_memory_peak"] <= 16 << 20, s
try:
    with fastload.Loader(t + "/small_bombs.ds", batch_size=2, size=32, workers=2,
                         decode_memory=4 << 20) as L:
        next(iter(L))
    raise SystemExit("no error under a 4 MiB budget")
except fastload.Error as e:
    assert "record 0" in str(e) and "decode memory budget (4.0 MiB" in str(e), str(e)
print("ok")
PY
    [[ $(tail -n 1 "$T/py") == ok ]] && pass "Python Loader(decode_memory=...)" ||
        fail "Python Loader(decode_memory=...): $(tail -n 3 "$T/py")"
fi
finish
