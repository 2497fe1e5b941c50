#!/usr/bin/env bash
# test_mixed_formats.sh — `--encode keep` on a folder mixing JPEG, PNG and
# WebP keeps each input in its own format (schema "mixed", a format per record), where it used
# to abort the whole run ("this dataset keeps JPEG"). Checks: without --on-error skip a GIF (and
# an animated WebP) fails the run naming the file, with it they are skipped and reported and the
# run goes on; every record extracts to the original bytes (a PNG named .JPEG comes back as
# .png); verify --decode passes; libfastload's samples equal PIL's decode of each original
# (shards, zstd, LMDB; a CMYK JPEG within the tolerance of test_input_kinds.sh); one-format
# folders keep their format as schema; --encode jpeg/raw read WebP; the N datasets of a --part
# job get the same mixed schema.
# Fixtures come from /usr/bin/python3 + PIL with WebP (skips when missing).
. "$(dirname "$0")/lib.sh"
DUMP="$B/tests/packdata/pd_loader_dump"
[[ -x "$DUMP" ]] || { echo "SKIP: $DUMP not built"; exit 77; }
/usr/bin/python3 -c "from PIL import features; assert features.check('webp')" 2>/dev/null ||
    { echo "SKIP: /usr/bin/python3 has no PIL with WebP"; exit 77; }
M="$T/mixed"
/usr/bin/python3 - "$M" <<'PY' || { echo "FAIL: fixture script"; exit 1; }
import os, sys
from PIL import Image
root = sys.argv[1]
W, H = 40, 28
def img(seed):
    im = Image.new("RGB", (W, H))
    im.putdata([((x * 6 + seed * 11) % 256, (y * 9 + seed * 3) % 256, ((x + y) * 4 + seed) % 256)
                for y in range(H) for x in range(W)])
    return im
for d in ("mix/cat", "mix/dog", "bad", "webp/a", "webp/b", "jpeg/a"):
    os.makedirs(f"{root}/{d}", exist_ok=True)
img(1).save(f"{root}/mix/cat/a1.jpg", quality=92)
img(2).save(f"{root}/mix/cat/a2.png")
img(3).save(f"{root}/mix/cat/a3.webp", quality=85)                    # lossy VP8
img(4).save(f"{root}/mix/dog/b1.webp", lossless=True)                 # VP8L
rgba = img(5).convert("RGBA"); rgba.putalpha(Image.linear_gradient("L").resize((W, H)))
rgba.save(f"{root}/mix/dog/b2.webp", quality=80)                      # VP8X + alpha
img(6).save(f"{root}/mix/dog/b3.JPEG", format="PNG")                  # a PNG named .JPEG
img(7).convert("L").save(f"{root}/mix/dog/b4.jpg", quality=90)        # gray JPEG
img(8).save(f"{root}/mix/dog/b5.jpeg", quality=75, progressive=True)
img(12).convert("CMYK").save(f"{root}/mix/dog/b6_cmyk.JPEG", quality=90) # as ImageNet has
# inputs no build keeps: a GIF and an animated WebP
img(9).save(f"{root}/bad/c1.gif")
img(10).save(f"{root}/bad/c2.webp", save_all=True, append_images=[img(11)], duration=100, loop=0)
img(1).save(f"{root}/webp/a/w1.webp", quality=90)
img(2).save(f"{root}/webp/b/w2.webp", lossless=True)
img(3).save(f"{root}/jpeg/a/j1.jpg", quality=90)
img(4).save(f"{root}/jpeg/a/j2.jpg", quality=90)
PY
O="$T/o"
mkdir -p "$O"
# a build without libwebp (FL_WEBP=OFF, no libwebp-dev): WebP inputs are refused as unsupported,
# with a message saying how to get WebP; the rest of this test needs WebP
"$P" pack "$M/webp" "$O/probe" --encode keep --on-error skip --quiet >/dev/null 2>"$T/err" # 0 or 1
if grep -q "no WebP support" "$T/err"; then
    expect_err "libwebp-dev" "no-WebP build: the message says how to get WebP"
    expect_status 1 "no-WebP build: WebP without skip" -- "$P" pack "$M/webp" "$O/probe2" --encode keep &&
        expect_err "w1.webp" "no-WebP build: the error names the file"
    [[ $failures -eq 0 ]] && { echo "SKIP: this build has no WebP support (refusal checked)"; exit 77; }
    finish
fi
# the two unkeepable inputs join the mixed folder's "dog" class
cp "$M/bad/c1.gif" "$M/mix/dog/c1.gif"
cp "$M/bad/c2.webp" "$M/mix/dog/c2.webp"

# ---- without --on-error skip: the run fails naming the file, nothing is left behind
expect_status 1 "keep mixed without skip fails on the GIF" -- "$P" pack "$M/mix" "$O/noskip" --encode keep --quiet &&
    expect_err "c1.gif" "the error names the GIF" && expect_err "GIF" "the error says GIF"
[[ -e "$O/noskip" ]] && fail "a failed run left $O/noskip"

# ---- with --on-error skip: both skipped and reported, the rest packed
expect_status 0 "keep mixed with skip" -- "$P" pack "$M/mix" "$O/mix" --encode keep --on-error skip \
    --report "$O/mix.tsv" --json && {
    expect_err "c1.gif" "skip names the GIF"
    expect_err "c2.webp" "skip names the animated WebP"
    grep -q '"records":9' "$T/out" || fail "keep mixed: want 9 records: $(cat "$T/out")"
    grep -q '"encoding":"mixed"' "$T/out" || fail "keep mixed: encoding is not mixed: $(cat "$T/out")"
    grep -q '"skipped":2' "$T/out" || fail "keep mixed: want 2 skipped: $(cat "$T/out")"
    [[ $(grep -c 'not supported' "$O/mix.tsv") -eq 2 ]] || fail "report lacks the 2 unsupported inputs: $(cat "$O/mix.tsv")"
}
expect_status 0 "verify --decode mixed" -- "$P" verify "$O/mix" --decode
"$P" info "$O/mix" --json >"$T/info" 2>&1 && grep -q '"encoding":"mixed"' "$T/info" || fail "info: $(cat "$T/info")"

# every record extracts to its original bytes, named for its format
check_extract() { # DST SRCDIR
    local dst=$1 src=$2 n i name want got
    n=$("$P" info "$dst" --json | grep -o '"records":[0-9]*' | cut -d: -f2)
    mkdir -p "$T/ex" && rm -f "$T/ex"/*
    for ((i = 0; i < n; i++)); do
        (cd "$T/ex" && "$P" extract "$dst" $i 2>"$T/err") || { fail "extract $dst $i"; continue; }
        name=$(grep -o 'source [^)]*' "$T/err" | sed 's/^source //')
        got=$(grep -o -- '-> .*' "$T/err" | sed 's/^-> //')
        want=$(basename "$name")
        [[ $want == *.JPEG && $(head -c 4 "$src/$name" | od -An -c | tr -d ' ') == *PNG* ]] && want="${want%.JPEG}.png"
        [[ $got == "$want" ]] || fail "extract $dst $i: wrote '$got', want '$want'"
        cmp -s "$T/ex/$got" "$src/$name" || fail "extract $dst $i ($name): bytes differ from the original"
    done
}
check_extract "$O/mix" "$M/mix"

# libfastload's samples = PIL's RGB decode of each original (same libjpeg-turbo/libpng/libwebp)
check_loader() { # DST SRCDIR [io]
    local out="$T/dump"
    rm -rf "$out" && mkdir -p "$out"
    "$DUMP" "$1" 28 40 "$out" ${3:-} 2>"$T/err" || { fail "loader on $1 ${3:-}: $(head -3 "$T/err")"; return; }
    /usr/bin/python3 - "$out" "$2" <<'PY' || fail "loader on $1 ${3:-}: samples differ from PIL's decode"
import sys
from PIL import Image
out, src = sys.argv[1], sys.argv[2]
bad = 0
lines = open(f"{out}/names.txt").read().splitlines()
for line in lines:
    idx, name, label = line.split("\t")
    want = Image.open(f"{src}/{name}").convert("RGB").tobytes()
    got = open(f"{out}/{idx}.rgb", "rb").read()
    if "cmyk" in name and len(got) == len(want):
        # CMYK -> RGB is computed by hand (fl_image.h), not as PIL does: compare loosely, as
        # test_input_kinds.sh does
        if sum(abs(a - b) for a, b in zip(got, want)) / len(got) <= 12:
            continue
    if got != want:
        diff = max(abs(a - b) for a, b in zip(got, want)) if len(got) == len(want) else "size"
        print(f"  record {idx} ({name}): max diff {diff}", file=sys.stderr)
        bad += 1
if not lines:
    print("  no samples", file=sys.stderr); bad = 1
sys.exit(1 if bad else 0)
PY
}
check_loader "$O/mix" "$M/mix"
check_loader "$O/mix" "$M/mix" pread

# the same with zstd and with the LMDB backend
expect_status 0 "keep mixed + zstd" -- "$P" pack "$M/mix" "$O/mixz" --encode keep --compress zstd --on-error skip --quiet &&
    expect_status 0 "verify --decode mixed + zstd" -- "$P" verify "$O/mixz" --decode &&
    { check_extract "$O/mixz" "$M/mix"; check_loader "$O/mixz" "$M/mix"; }
expect_status 0 "keep mixed, LMDB" -- "$P" pack "$M/mix" "$O/mixl" --encode keep --backend lmdb --on-error skip --quiet &&
    expect_status 0 "verify --decode mixed LMDB" -- "$P" verify "$O/mixl" --decode &&
    { check_extract "$O/mixl" "$M/mix"; check_loader "$O/mixl" "$M/mix"; }

# one format throughout: the schema is that format
for f in webp jpeg; do
    expect_status 0 "keep all-$f" -- "$P" pack "$M/$f" "$O/all-$f" --encode keep --json &&
        { grep -q "\"encoding\":\"$f\"" "$T/out" || fail "all-$f: encoding is not $f: $(cat "$T/out")"; } &&
        expect_status 0 "verify --decode all-$f" -- "$P" verify "$O/all-$f" --decode &&
        { check_extract "$O/all-$f" "$M/$f"; check_loader "$O/all-$f" "$M/$f"; }
done

# --encode jpeg / raw read WebP (raw pixels equal PIL's decode)
expect_status 0 "encode jpeg from mixed" -- "$P" pack "$M/mix" "$O/j" --encode jpeg --on-error skip --quiet &&
    expect_status 0 "verify --decode jpeg from mixed" -- "$P" verify "$O/j" --decode
expect_status 0 "encode raw from mixed" -- "$P" pack "$M/mix" "$O/r" --encode raw --on-error skip --quiet &&
    check_loader "$O/r" "$M/mix"

# a --part job: both parts get the mixed schema, so the directory of parts opens as one
mkdir -p "$O/parts"
for i in 0 1; do
    expect_status 0 "keep mixed part $i/2" -- "$P" pack "$M/mix" "$O/parts/p$i" --encode keep --on-error skip --part $i/2 --quiet
done
expect_status 0 "verify --decode the combined parts" -- "$P" verify "$O/parts" --decode

pass "mixed JPEG/PNG/WebP folders keep each input in its format"
finish
