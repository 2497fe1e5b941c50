#!/usr/bin/env bash
# test_jpeg_restart.sh — `--jpeg-restart` rewrites JPEG records losslessly: the stored bytes change
# (restart markers, optimized Huffman tables) but every decode — whole images and the loader's
# random-resized crops — gives exactly the pixels of the original files; keep without it stays
# byte-exact; bad values are usage errors.
. "$(dirname "$0")/lib.sh"
FLT="$B/tools/fastload/fastload"
[[ -x "$FLT" ]] || { echo "SKIP: $FLT not built"; exit 77; }
O="$T/o"
mkdir -p "$O"
"$P" pack "$FX/jpg" "$O/keep" --encode keep --quiet 2>/dev/null || fail "pack keep"
for n in 4 row 1; do
    "$P" pack "$FX/jpg" "$O/r$n" --encode keep --jpeg-restart $n --quiet 2>/dev/null || fail "pack keep --jpeg-restart $n"
    "$P" verify "$O/r$n" --decode >/dev/null 2>&1 || fail "verify --decode after --jpeg-restart $n"
    cmp -s "$O/keep/shard-00000.fls" "$O/r$n/shard-00000.fls" && fail "--jpeg-restart $n left the bytes unchanged"
    for aug in none rrc,flip center; do
        a=$("$FLT" digest "$O/keep" --augment $aug --size 24 --batch 4 --workers 2 --seed 7 2>/dev/null | tail -1)
        b=$("$FLT" digest "$O/r$n" --augment $aug --size 24 --batch 4 --workers 2 --seed 7 2>/dev/null | tail -1)
        [[ -n "$a" && "$a" == "$b" ]] || fail "--jpeg-restart $n, augment $aug: pixels differ ('$a' vs '$b')"
    done
done
pass "restart markers keep every pixel (whole decode, rrc+flip, center crop)"
# keep stays byte-exact by default: record 0 extracts to the original file
"$P" extract "$O/keep" 0 -o "$T/x.jpg" 2>/dev/null || fail "extract"
src=$(grep -o '"source":"[^"]*"' <("$P" info "$O/keep" --json) | head -1)
first=$(find "$FX/jpg" -type f | sort | head -1)
cmp -s "$T/x.jpg" "$first" || fail "keep without --jpeg-restart is not byte-exact ($first)"
pass "keep stays byte-exact without --jpeg-restart"
"$P" pack "$FX/jpg" "$O/j" --encode jpeg --quiet 2>/dev/null || fail "pack --encode jpeg"
grep -q '"jpeg_restart":4' "$O/j/manifest.json" || fail "--encode jpeg should default to --jpeg-restart 4"
"$P" pack "$FX/jpg" "$O/j-off" --encode jpeg --jpeg-restart off --quiet 2>/dev/null || fail "pack --encode jpeg --jpeg-restart off"
cmp -s "$O/j/shard-00000.fls" "$O/j-off/shard-00000.fls" && fail "--encode jpeg: restart markers changed no byte"
for aug in none rrc,flip; do
    a=$("$FLT" digest "$O/j" --augment $aug --size 24 --batch 4 --workers 2 --seed 3 2>/dev/null | tail -1)
    b=$("$FLT" digest "$O/j-off" --augment $aug --size 24 --batch 4 --workers 2 --seed 3 2>/dev/null | tail -1)
    [[ -n "$a" && "$a" == "$b" ]] || fail "--encode jpeg with and without restart markers decode differently ($aug)"
done
expect_status 2 "bad --jpeg-restart" -- "$P" pack "$FX/jpg" "$O/bad" --jpeg-restart lots
expect_err "--jpeg-restart wants" "usage message"
pass "defaults and usage errors"
finish
