#!/usr/bin/env bash
# test_input_kinds.sh — the JPEG/PNG variants packdata must read: baseline and progressive JPEG,
# grayscale and CMYK JPEG, 4:4:4 / 4:2:2 / 4:2:0 subsampling, PNG 8/16-bit, palette, gray+alpha,
# RGBA. Fixtures come from /usr/bin/python3 + PIL (skips when missing). Each kind packs under
# keep (per format), jpeg and raw, verifies with --decode, and raw pixels match PIL's RGB decode
# within JPEG tolerance (exactly for PNG).
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c "import PIL" 2>/dev/null || { echo "SKIP: /usr/bin/python3 has no PIL"; exit 77; }
K="$T/kinds"
/usr/bin/python3 - "$K" <<'PY' || { echo "FAIL: fixture script"; exit 1; }
import os, sys
from PIL import Image
root = sys.argv[1]
W, H = 40, 28
def base(mode="RGB"):
    im = Image.new("RGB", (W, H))
    im.putdata([((x * 6) % 256, (y * 9) % 256, ((x + y) * 4) % 256) for y in range(H) for x in range(W)])
    return im
os.makedirs(f"{root}/jpeg/0k", exist_ok=True)
os.makedirs(f"{root}/png/0k", exist_ok=True)
b = base()
b.save(f"{root}/jpeg/0k/baseline.jpg", quality=95)
b.save(f"{root}/jpeg/0k/progressive.jpg", quality=95, progressive=True)
b.convert("L").save(f"{root}/jpeg/0k/gray.jpg", quality=95)
b.convert("CMYK").save(f"{root}/jpeg/0k/cmyk.jpg", quality=95)
b.save(f"{root}/jpeg/0k/s444.jpg", quality=95, subsampling=0)
b.save(f"{root}/jpeg/0k/s422.jpg", quality=95, subsampling=1)
b.save(f"{root}/jpeg/0k/s420.jpg", quality=95, subsampling=2)
b.save(f"{root}/png/0k/rgb8.png")
g = b.convert("L")
g16 = Image.new("I;16", (W, H))
g16.putdata([v * 257 for v in g.getdata()])
g16.save(f"{root}/png/0k/gray16.png")
b.quantize(64).save(f"{root}/png/0k/palette.png")
b.convert("LA").save(f"{root}/png/0k/gray_alpha.png")
rgba = b.convert("RGBA"); rgba.putalpha(255); rgba.save(f"{root}/png/0k/rgba.png")
b.convert("L").save(f"{root}/png/0k/gray8.png")
# reference RGB pixels as PIL decodes them
for fmt in ("jpeg", "png"):
    d = f"{root}/{fmt}/0k"
    for f in sorted(os.listdir(d)):
        im = Image.open(f"{d}/{f}")
        if im.mode == "I;16" or im.mode == "I":
            im = im.point(lambda v: v / 256).convert("L")
        open(f"{root}/{fmt}-{f}.rgb", "wb").write(im.convert("RGB").tobytes())
PY
O="$T/o"
mkdir -p "$O"
for fmt in jpeg png; do
    expect_status 0 "keep $fmt kinds" -- "$P" pack "$K/$fmt" "$O/keep-$fmt" --encode keep --quiet && \
        expect_status 0 "verify --decode keep $fmt" -- "$P" verify "$O/keep-$fmt" --decode
    expect_status 0 "jpeg $fmt kinds" -- "$P" pack "$K/$fmt" "$O/jpeg-$fmt" --encode jpeg --quiet && \
        expect_status 0 "verify --decode jpeg $fmt" -- "$P" verify "$O/jpeg-$fmt" --decode
    expect_status 0 "raw $fmt kinds" -- "$P" pack "$K/$fmt" "$O/raw-$fmt" --encode raw --compress none --quiet || continue
    n=$("$P" info "$O/raw-$fmt" --json | grep -o '"records":[0-9]*' | cut -d: -f2)
    [[ $n -ge 6 ]] || fail "raw $fmt: only $n records"
    for ((i = 0; i < n; i++)); do
        "$P" extract "$O/raw-$fmt" $i -o "$T/r.ppm" --pnm 2>"$T/err" || { fail "extract raw $fmt $i"; continue; }
        name=$(grep -o 'source [^)]*' "$T/err" | sed 's/^source 0k\///')
        tol=0; [[ $fmt == jpeg ]] && tol=6
        [[ $name == cmyk.jpg ]] && tol=12
        tail -c $((40 * 28 * 3)) "$T/r.ppm" >"$T/r.rgb"
        /usr/bin/python3 - "$T/r.rgb" "$K/$fmt-$name.rgb" $tol <<'PY' || fail "raw $fmt $name: pixels differ from PIL's decode"
import sys
a = open(sys.argv[1], "rb").read(); b = open(sys.argv[2], "rb").read(); tol = int(sys.argv[3])
assert len(a) == len(b), (len(a), len(b))
mean = sum(abs(x - y) for x, y in zip(a, b)) / len(a)
mx = max(abs(x - y) for x, y in zip(a, b))
if (tol == 0 and mx) or mean > tol:
    print(f"  mean abs diff {mean:.2f}, max {mx}", file=sys.stderr); sys.exit(1)
PY
    done
done
pass "JPEG/PNG input kinds pack, verify and decode to the right pixels"
finish
