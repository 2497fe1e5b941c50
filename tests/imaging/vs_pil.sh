#!/usr/bin/env bash
# vs_pil.sh — imaging against PIL (which uses the same libjpeg-turbo and libpng):
# (1) fl_decode equals Image.open().convert("RGB") exactly on every JPEG/PNG photo shipped by
#     python3-skimage (palette, 16-bit, alpha, gray included), and convert("L") exactly for PNG
#     (JPEG gray comes straight from libjpeg's Y channel: within a few levels); the truncated
#     sample fails with "Premature end";
# (2) fl_resize agrees with Image.resize(BILINEAR) (+ ImageOps.mirror for flip) within one level on
#     a real photograph (else a synthetic image), shrinking and enlarging, RGB and gray.
# Skips (77) without Debian's python3 + numpy + PIL; part (1) needs python3-skimage.
set -euo pipefail
py=/usr/bin/python3
tool="$FL_BINARY_DIR/tests/imaging/resize_raw"
dec="$FL_BINARY_DIR/tests/imaging/decode_raw"
[[ -x "$tool" && -x "$dec" ]] || { echo "vs_pil: $tool or $dec not built"; exit 1; }
$py -c "import numpy, PIL" 2>/dev/null || { echo "vs_pil: numpy/PIL not importable by $py: skip"; exit 77; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/vs_pil.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
$py - "$dec" "$tmp" <<'PY'
import glob, os, subprocess, sys, warnings
import numpy as np
from PIL import Image
warnings.simplefilter("ignore")
dec, tmp = sys.argv[1], sys.argv[2]
files = sorted(glob.glob("/usr/lib/python3/dist-packages/skimage/data/*.png") +
               glob.glob("/usr/lib/python3/dist-packages/skimage/data/*.jpg"))
if not files:
    print("vs_pil: python3-skimage photos not installed: decode comparison skipped")
    sys.exit(0)
bad = 0
for fn in files:
    name = os.path.basename(fn)
    for ch, mode in ((3, "RGB"), (1, "L")):
        out = os.path.join(tmp, "dec.raw")
        r = subprocess.run([dec, fn, str(ch), out], capture_output=True, text=True)
        if name == "truncated.jpg":
            if r.returncode != 2 or "Premature end" not in r.stderr:
                print(f"vs_pil: {name}: want a decode error naming the premature end, got {r.returncode} {r.stderr!r}")
                bad += 1
            continue
        if r.returncode:
            print(f"vs_pil: {name}: {r.stderr.strip()}")
            bad += 1
            continue
        w, h = map(int, r.stdout.split())
        got = np.fromfile(out, np.uint8).reshape((h, w, ch) if ch == 3 else (h, w)).astype(int)
        im = Image.open(fn)
        ref = np.asarray(im.convert(mode)).astype(int)
        if got.shape != ref.shape:
            print(f"vs_pil: {name} {mode}: shape {got.shape} vs PIL {ref.shape}")
            bad += 1
            continue
        d = int(np.abs(got - ref).max())
        limit = 6 if (mode == "L" and im.format == "JPEG") else 0
        if d > limit:
            print(f"vs_pil: {name} {mode}: max diff {d} from PIL (allowed {limit})")
            bad += 1
print(f"vs_pil: fl_decode vs PIL on {len(files)} skimage photos: {'OK' if not bad else str(bad) + ' mismatches'}")
sys.exit(1 if bad else 0)
PY
$py - "$tool" "$tmp" <<'PY'
import os, subprocess, sys
import numpy as np
from PIL import Image, ImageOps
tool, tmp = sys.argv[1], sys.argv[2]
photo = "/usr/lib/python3/dist-packages/skimage/data/astronaut.png"
if os.path.exists(photo):
    img = Image.open(photo).convert("RGB")
    src = "astronaut"
else:
    y, x = np.mgrid[0:300, 0:400]
    rng = np.random.default_rng(1)
    a = (128 + 60 * np.sin(x / 13.0)[..., None] * np.cos(y / 7.0)[..., None] + rng.integers(-40, 40, (300, 400, 3)))
    img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
    src = "synthetic"
worst = 0
for mode in ("RGB", "L"):
    im = img.convert(mode)
    a = np.asarray(im)
    h, w = a.shape[:2]
    ch = 3 if mode == "RGB" else 1
    a.tofile(os.path.join(tmp, "in.raw"))
    for dw, dh in ((224, 224), (97, 61), (w - 1, h // 2), (w + 37, h + 11), (3, 700), (1, 1)):
        for flip in (0, 1):
            out = os.path.join(tmp, "out.raw")
            subprocess.run([tool, os.path.join(tmp, "in.raw"), str(w), str(h), str(ch), out, str(dw), str(dh), str(flip)], check=True)
            got = np.fromfile(out, np.uint8).reshape((dh, dw, ch) if ch == 3 else (dh, dw)).astype(int)
            ref = im.resize((dw, dh), Image.BILINEAR)
            if flip:
                ref = ImageOps.mirror(ref)
            d = np.abs(got - np.asarray(ref).astype(int))
            worst = max(worst, int(d.max()))
            if d.max() > 1:
                print(f"vs_pil: {src} {mode} {w}x{h} -> {dw}x{dh} flip {flip}: max diff {d.max()} (mean {d.mean():.3f})")
                sys.exit(1)
print(f"vs_pil: fl_resize within {worst} level(s) of PIL BILINEAR on {src} (RGB and L, 6 sizes, flip)")
PY
