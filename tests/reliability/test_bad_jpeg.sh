#!/usr/bin/env bash
# test_bad_jpeg.sh — "the one bad JPEG": an ImageFolder where one JPEG has garbage in its
# entropy-coded data (headers intact, so `pack --encode keep` stores it as is, with a valid
# CRC). `verify --decode` names it (record and source); the loader stops with exit 1 naming
# shard and record; with --on-corrupt skip (full decodes) every epoch delivers all batches and
# counts exactly one skip per epoch; `pack --encode jpeg` (which decodes) refuses or skips it by name.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$FLT"
"$MKIDX" "$T/idx" 200 || die "fixture"
"$P" pack "$T/idx" "$T/j" --encode jpeg --quiet 2>"$T/err" || die "pack jpeg: $(cat "$T/err")"
mkdir -p "$T/f/a" "$T/f/b"
for i in $(seq 0 199); do
    "$P" extract "$T/j" $i -o "$T/f/$( ((i % 2)) && echo b || echo a)/$(printf %03d $i).jpg" 2>/dev/null || die "extract $i"
done
bad="$T/f/a/042.jpg"
sos=$(LC_ALL=C grep -obUaP '\xff\xda' "$bad" | head -1 | cut -d: -f1)
[[ -n $sos ]] || die "no SOS marker in $bad"
# 60 bytes of a fixed non-JPEG pattern right after the scan header
printf '\x13\x37\xc0\xde%.0s' $(seq 15) | dd of="$bad" bs=1 seek=$((sos + 20)) conv=notrunc status=none

expect_status 0 "pack --encode keep stores it (headers are fine)" -- "$P" pack "$T/f" "$T/k" --encode keep --quiet
expect_status 1 "verify --decode" -- "$P" verify "$T/k" --decode
expect_err "a/042.jpg" "verify --decode names the source"
rec=$(sed -nE 's/.*bad record ([0-9]+).*/\1/p' "$T/err" | head -1)
[[ -n $rec ]] || fail "verify --decode does not name the record: $(head -2 "$T/err")"
msg=$(grep -m1 'bad record' "$T/err" | sed "s|$T/||g")
expect_status 0 "verify (CRC only) passes: the bytes are as stored" -- "$P" verify "$T/k"
pass "verify --decode: '$msg'"

expect_status 1 "bench over the bad record" -- "$FLT" bench "$T/k" --augment center --size 28 --batch 16 --io pread --quiet
expect_err "shard-00000.fls: record $rec:" "bench names shard and record"
pass "bench: '$(grep -m1 error "$T/err" | sed "s|$T/||g")'"

# full decodes (no crop: with random-resized-crop a crop that ends above the damage never decodes
# it, so the record passes in some epochs — verify --decode is the check for the whole file)
expect_status 0 "bench --on-corrupt skip, 3 epochs" -- "$FLT" bench "$T/k" --augment none --size 28 --batch 16 \
    --epochs 3 --io pread --on-corrupt skip --json --quiet
grep -q '"skipped":3,' "$T/out" || fail "skip mode: want 3 skips over 3 epochs: $(grep -o '"skipped":[0-9]*' "$T/out")"
grep -q '"batches":39,' "$T/out" || fail "skip mode: want 39 batches: $(grep -o '"batches":[0-9]*' "$T/out")"
pass "bench --on-corrupt skip: 3 epochs complete, one skip per epoch"

expect_status 1 "pack --encode jpeg (decodes) refuses it" -- "$P" pack "$T/f" "$T/r" --encode jpeg --quiet
expect_err "a/042.jpg" "pack --encode jpeg names the file"
expect_status 0 "pack --encode jpeg --on-error skip" -- "$P" pack "$T/f" "$T/r" --encode jpeg --quiet --on-error skip --report "$T/r.tsv"
grep -q "a/042.jpg" "$T/r.tsv" && [[ $(wc -l <"$T/r.tsv") -eq 1 ]] || fail "skip report: $(cat "$T/r.tsv")"
"$P" info "$T/r" --json | grep -q '"records":199,' || fail "skip mode should pack 199 records"
pass "pack --encode jpeg: refuses the bad JPEG by name, or skips and reports it"
finish
