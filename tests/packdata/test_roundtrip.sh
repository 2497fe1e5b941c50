#!/usr/bin/env bash
# test_roundtrip.sh — every SRC form × encoding × backend packs and reads back exactly: pixels for
# raw (against the generating pattern), bytes for keep, labels, names and class names; extract,
# info --json and verify --decode agree; output identical across --workers; --shuffle/--part.
. "$(dirname "$0")/lib.sh"
O="$T/out.d"
mkdir -p "$O"
n=0
# form | pack arguments | checker form | keep root (for keep)
cases=(
  "folder|$FX/png|folder|$FX/png"
  "list|$FX/list.txt|folder|$FX"
  "csv|--csv $FX/data.csv|folder|$FX"
  "idx|$FX/idx|idx|"
  "idxflag|--idx $FX/idx-plain-images $FX/idx-plain-labels|idx|"
  "cifar10|$FX/cifar10 --split train|cifar10|"
  "cifar100|$FX/cifar100|cifar100|"
)
for c in "${cases[@]}"; do
    IFS='|' read -r form args cform root <<<"$c"
    for enc in keep raw jpeg; do
        [[ $enc == keep && -z $root ]] && continue
        for be in shards lmdb; do
            n=$((n + 1))
            d="$O/$form-$enc-$be"
            # shellcheck disable=SC2086
            if ! expect_status 0 "pack $form $enc $be" -- "$P" pack $args "$d" --encode "$enc" --backend "$be" --quiet --workers 2; then continue; fi
            if ! "$FIX" check "$d" "$cform" "$enc" "$root" >"$T/chk" 2>&1; then
                fail "check $form $enc $be"; sed 's/^/    /' "$T/chk" | head -5; continue
            fi
            expect_status 0 "verify --decode $form $enc $be" -- "$P" verify "$d" --decode --quiet || continue
        done
    done
done
pass "$n pack/check/verify round trips"

# class names and counts through info --json
"$P" info "$O/folder-keep-shards" --json >"$T/info.json" || fail "info --json"
grep -q '"records":12' "$T/info.json" || fail "info --json records: $(cat "$T/info.json")"
grep -qF '"classes":["0cat","1dog","2 été x"]' "$T/info.json" || fail "info --json classes: $(head -c 300 "$T/info.json")"
grep -q '"encoding":"png"' "$T/info.json" || fail "info --json encoding"
grep -q '"shards":1' "$T/info.json" || fail "info --json shards"
"$P" info "$O/cifar10-raw-lmdb" --json >"$T/info2.json" || fail "info lmdb"
grep -q '"backend":"lmdb"' "$T/info2.json" || fail "info --json backend lmdb"
grep -q '"airplane"' "$T/info2.json" || fail "CIFAR-10 class names from batches.meta.txt"
pass "info --json"

# extract: keep gives the original bytes; raw gives a PNG, or PGM/PPM with --pnm
(cd "$T" && "$P" extract "$O/folder-keep-shards" 5 >/dev/null 2>"$T/err") || fail "extract keep"
f=$(ls "$T"/img_*.png 2>/dev/null | head -1)
[[ -n $f ]] && cmp -s "$f" "$FX/png/1dog/$(basename "$f")" || fail "extract keep: bytes differ from the source ($f)"
"$P" extract "$O/idx-raw-shards" 3 -o "$T/x.pgm" --pnm 2>/dev/null || fail "extract --pnm"
[[ $(head -c 2 "$T/x.pgm") == P5 && $(stat -c %s "$T/x.pgm") -eq $((11 + 35)) ]] || fail "extract --pnm: not a 5x7 PGM"
"$P" extract "$O/cifar10-raw-shards" 0 -o "$T/x.png" 2>/dev/null || fail "extract raw as PNG"
[[ $(head -c 4 "$T/x.png" | od -An -tx1 | tr -d ' ') == 89504e47 ]] || fail "extract raw: not a PNG"
expect_status 1 "extract out of range" -- "$P" extract "$O/idx-raw-shards" 40 -o "$T/y"
expect_err "record 40 does not exist" "extract out of range names the record"
# beside the sources (a user's only copy), a default name never replaces a file: a re-encoded
# pack's extract would overwrite the original photo with the lossy copy; -o and --force replace
"$P" pack "$FX/jpg" "$O/reenc" --encode jpeg --quality 40 --quiet 2>/dev/null || fail "pack reenc"
cp -a "$FX/jpg" "$T/orig"
"$P" extract "$O/reenc" 0 -o /dev/null 2>"$T/err" || fail "extract reenc"
src=$(grep -o 'source [^)]*' "$T/err" | sed 's/^source //') && f=$(basename "$src")
[[ -f $T/orig/$src && $f == *.jpg ]] || fail "extract reenc: source '$src' not a .jpg of the fixture"
(cd "$T/orig/$(dirname "$src")" && "$P" extract "$O/reenc" 0 >/dev/null 2>"$T/err")
st=$?
[[ $st -eq 1 ]] && grep -q "$f: cannot write: a file of that name exists" "$T/err" &&
    cmp -s "$T/orig/$src" "$FX/jpg/$src" || fail "extract beside its source: exit $st, $(cat "$T/err")"
(cd "$T/orig/$(dirname "$src")" && "$P" extract "$O/reenc" 0 --force 2>/dev/null) &&
    ! cmp -s "$T/orig/$src" "$FX/jpg/$src" || fail "extract --force does not replace $f"
f=$(basename "$(ls "$T"/img_*.png | head -1)")
echo mine >"$T/named" && "$P" extract "$O/folder-keep-shards" 5 -o "$T/named" 2>/dev/null &&
    cmp -s "$T/named" "$FX/png/1dog/$f" || fail "extract -o FILE does not replace FILE"
"$P" extract "$O/folder-keep-shards" 5 -o /dev/null 2>/dev/null || fail "extract -o /dev/null"
pass "extract"

# workers 1 vs 2 (and shuffle) give byte-identical shards
for w in 1 2; do
    "$P" pack "$FX/jpg" "$O/w$w" --encode jpeg --max-side 32 --shuffle --seed 7 --workers $w --quiet 2>/dev/null || fail "pack workers $w"
    "$P" pack "$FX/cifar10" "$O/cw$w" --split train --shuffle --seed 3 --workers $w --shard-size 4K --quiet 2>/dev/null || fail "pack cifar workers $w"
done
for s in "$O"/w1/*.fls; do cmp -s "$s" "$O/w2/$(basename "$s")" || fail "--workers 1 vs 2 differ: $(basename "$s")"; done
nsh=0
for s in "$O"/cw1/*.fls; do nsh=$((nsh + 1)); cmp -s "$s" "$O/cw2/$(basename "$s")" || fail "--workers 1 vs 2 differ (cifar): $(basename "$s")"; done
[[ $nsh -ge 2 ]] || fail "--shard-size 4K should give several shards (got $nsh)"
"$FIX" check "$O/cw1" cifar10 raw >/dev/null || fail "shuffled multi-shard dataset check"
"$P" pack "$FX/jpg" "$O/w3" --encode jpeg --max-side 32 --shuffle --seed 8 --quiet 2>/dev/null
cmp -s "$O/w1/shard-00000.fls" "$O/w3/shard-00000.fls" && fail "--seed 7 and 8 gave the same order"
grep -q '"seed":7' "$O/w1/manifest.json" || fail "seed not stored in the manifest options"
pass "deterministic across --workers, --shuffle --seed"

# --part I/N: the parts partition the input
total=0
for i in 0 1 2; do
    "$P" pack "$FX/idx" "$O/part$i" --part $i/3 --quiet 2>/dev/null || fail "pack --part $i/3"
    r=$("$P" info "$O/part$i" --json | grep -o '"records":[0-9]*' | cut -d: -f2)
    total=$((total + r))
    grep -q '"part":"'$i'/3"' "$O/part$i/manifest.json" || fail "--part $i/3 not in the manifest options"
    "$P" info "$O/part$i" | grep -q "^part: *$i/3" || fail "info does not show part $i/3"
done
[[ $total -eq 40 ]] || fail "--part 0..2/3 hold $total records, want 40"
pass "--part"

# jpeg --max-side really bounds the size; --resize gives one fixed size for raw
"$P" pack "$FX/jpg" "$O/rs" --encode raw --resize 20x10 --quiet 2>/dev/null || fail "raw --resize"
"$P" info "$O/rs" --json | grep -q '"height":10,"width":20' || fail "raw --resize schema"
"$P" info "$O/w1" | grep -q "variable size" || fail "jpeg schema variable size"
"$P" pack "$FX/png" "$O/js" --encode jpeg --max-side 12 --json --quiet >"$T/sum.json" 2>/dev/null || fail "jpeg --max-side 12"
grep -q '"records":12' "$T/sum.json" || fail "pack --json summary: $(cat "$T/sum.json")"
for i in 0 5 11; do
    "$P" extract "$O/js" $i -o "$T/j.jpg" 2>"$T/err" || fail "extract jpeg $i"
    grep -q "12x8," "$T/err" || fail "max-side 12: record $i is not 12x8 ($(cat "$T/err"))"
done
pass "--max-side / --resize"

# progress bar: drawn on a terminal (rate + ETA), absent when stderr is not one or with --quiet
"$P" pack "$FX/png" "$O/np" --encode raw 2>"$T/err" >/dev/null || fail "pack without a tty"
grep -q "ETA" "$T/err" && fail "progress bar drawn although stderr is not a terminal"
grep -q "packed 12 records, 3 classes" "$T/err" || fail "summary missing: $(cat "$T/err")"
grep -q "skipped 0" "$T/err" || fail "summary lacks the skip count"
if command -v script >/dev/null; then
    script -qec "$P pack $FX/png $O/tty --encode raw --workers 1" /dev/null >"$T/tty" 2>&1 || fail "pack on a pty"
    grep -q "ETA" "$T/tty" || fail "no progress bar on a terminal: $(head -c 300 "$T/tty")"
    script -qec "$P pack $FX/png $O/tty2 --encode raw --quiet" /dev/null >"$T/tty" 2>&1
    grep -q "ETA" "$T/tty" && fail "--quiet still draws the progress bar"
    pass "progress bar only on a terminal"
fi
finish
