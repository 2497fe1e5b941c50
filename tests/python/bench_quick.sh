#!/usr/bin/env bash
# bench_quick.sh — smoke test of bench/loader.sh --quick: makes 200 photo-like JPEGs, packs them,
# runs every figure once into a temp dir and checks the final table is complete (PASS/MISS are not
# judged: the machine may be busy). Skips (77) without PIL/numpy or the skimage photographs.
set -u
src=${FL_SOURCE_DIR:?} bin=${FL_BINARY_DIR:?}
/usr/bin/python3 -c "import numpy, PIL, skimage.data" 2>/dev/null || { echo "SKIP: needs python3-numpy, -pil, -skimage"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fl-benchq-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bash "$src/bench/loader.sh" --quick --build "$bin" --out "$tmp" >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
[[ $rc -eq 0 ]] || { echo "FAIL: loader.sh exited $rc"; exit 1; }
for row in "fastload JPEG rrc224+flip" "2 x 1-core full decode" "fastload raw 64x64x3" "python binding JPEG" "python binding raw"; do
    grep -q "$row" "$tmp/log" || { echo "FAIL: table row '$row' missing"; exit 1; }
done
grep -Eq "fastload JPEG.* [0-9]+ img/s" "$tmp/log" || { echo "FAIL: no fastload rate"; exit 1; }
[[ -s "$tmp/summary.json" ]] || { echo "FAIL: summary.json missing"; exit 1; }
echo "ok   bench/loader.sh --quick"
