#!/usr/bin/env bash
# test_verify_resume.sh — `verify` names a record with a flipped byte and fails on a truncated
# shard; kill -9 at several points of a pack leaves DST absent, `--resume` completes it without
# redoing finished shards, and the result is byte-identical to an uninterrupted pack (also in
# skip mode, where the skip journal maps records back to inputs).
. "$(dirname "$0")/lib.sh"
O="$T/o"
mkdir -p "$O"

# ---- verify -----------------------------------------------------------------------------------
"$P" pack "$FX/png" "$O/v" --quiet --encode keep || fail "pack for verify"
expect_status 0 "verify clean" -- "$P" verify "$O/v"
shard="$O/v/shard-00000.fls"
data_off=$(od -An -t u8 -j 80 -N 8 "$shard" | tr -d ' ')
# record 0 = 0cat/img_0.png: flip one byte in the middle of its payload
off=$((data_off + 40))
b=$(od -An -t u1 -j $off -N 1 "$shard" | tr -d ' ')
printf "$(printf '\\%03o' $(((b ^ 0xff) & 255)))" | dd of="$shard" bs=1 seek=$off conv=notrunc status=none
expect_status 1 "verify flipped byte" -- "$P" verify "$O/v"
expect_err "bad record 0 (shard 0, source 0cat/img_0.png)" "verify names the flipped record"
expect_status 1 "verify --json flipped byte" -- "$P" verify "$O/v" --json
grep -q '"bad":1' "$T/out" && grep -q '"name":"0cat/img_0.png"' "$T/out" || fail "verify --json: $(cat "$T/out")"
expect_status 1 "verify --decode flipped byte" -- "$P" verify "$O/v" --decode
expect_err "bad record 0" "verify --decode names the record"
expect_status 1 "extract of a corrupt record" -- "$P" extract "$O/v" 0 -o "$T/x.png"
pass "verify catches a flipped byte"
"$P" pack "$FX/cifar10" "$O/t" --split train --shard-size 4K --quiet || fail "pack for truncation"
sz=$(stat -c %s "$O/t/shard-00001.fls")
truncate -s $((sz - 100)) "$O/t/shard-00001.fls"
expect_status 1 "verify truncated shard" -- "$P" verify "$O/t"
expect_err "shard-00001.fls" "verify names the truncated shard"
pass "verify catches a truncated shard"

# ---- kill -9 + resume ---------------------------------------------------------------------------
"$P" pack "$FX/cifar10" "$O/ref" --split train --shard-size 4K --shuffle --seed 5 --quiet 2>/dev/null || fail "reference pack"
nref=$(ls "$O/ref"/*.fls | wc -l)
[[ $nref -ge 3 ]] || fail "reference should have several shards (has $nref)"
for k in 1 4 7 11; do
    d="$O/k$k"
    PACKDATA_TEST_KILL_AFTER=$k "$P" pack "$FX/cifar10" "$d" --split train --shard-size 4K --shuffle --seed 5 --quiet 2>/dev/null
    st=$?
    [[ $st -eq 137 ]] || { fail "kill after $k: exit $st, want 137 (SIGKILL)"; continue; }
    [[ ! -e $d ]] || fail "kill after $k: $d exists after the kill"
    [[ -d $d.partial ]] || fail "kill after $k: no $d.partial"
    expect_status 1 "rerun without --resume after kill $k" -- "$P" pack "$FX/cifar10" "$d" --split train --shard-size 4K --shuffle --seed 5 --quiet
    expect_err "--resume" "leftover partial hint"
    expect_status 0 "resume after kill $k" -- "$P" pack "$FX/cifar10" "$d" --split train --shard-size 4K --shuffle --seed 5 --resume
    [[ $k -ge 4 ]] && { grep -q "resuming: [1-9][0-9]* records already packed" "$T/err" || fail "resume after $k redid finished shards: $(cat "$T/err")"; }
    [[ -d $d && ! -e $d.partial ]] || fail "resume after $k: not renamed into place"
    expect_status 0 "verify after resume $k" -- "$P" verify "$d" --decode
    for s in "$O"/ref/*.fls; do cmp -s "$s" "$d/$(basename "$s")" || fail "resume after $k: $(basename "$s") differs from the uninterrupted pack"; done
    "$FIX" check "$d" cifar10 raw >/dev/null || fail "resume after $k: content check"
done
pass "kill -9 at 4 points + --resume = uninterrupted pack"

# the LMDB backend resumes too
"$P" pack "$FX/cifar10" "$O/lref" --split train --backend lmdb --quiet 2>/dev/null || fail "lmdb reference"
PACKDATA_TEST_KILL_AFTER=5 "$P" pack "$FX/cifar10" "$O/l5" --split train --backend lmdb --quiet 2>/dev/null
[[ $? -eq 137 && ! -e $O/l5 ]] || fail "lmdb kill: want exit 137 and no DST"
expect_status 0 "lmdb resume" -- "$P" pack "$FX/cifar10" "$O/l5" --split train --backend lmdb --resume --quiet
"$FIX" check "$O/l5" cifar10 raw >/dev/null || fail "lmdb resume: content check"
expect_status 0 "lmdb verify after resume" -- "$P" verify "$O/l5" --decode
pass "LMDB kill -9 + --resume"

# kill during a pack that replaces an existing dataset: the old one stays intact
cp -r "$O/ref" "$O/old"
PACKDATA_TEST_KILL_AFTER=5 "$P" pack "$FX/cifar10" "$O/old" --split test --shard-size 4K --force --quiet 2>/dev/null
"$P" info "$O/old" --json | grep -q '"records":12,' || fail "killed --force run damaged the previous dataset"
pass "killed --force run leaves the previous dataset"

# skip mode: bad inputs interleaved, small shards, kill, resume: same records, every skip reported once
ls "$FX/png"/*/*.png | sed "s|$FX/png/||" | awk '{print $0" "substr($0,1,1)}' >"$T/l.txt"
awk 'NR==3{print "missing1.png 0"} NR==7{print "missing2.png 1"} NR==10{print "missing3.png 2"} {print}' "$T/l.txt" >"$T/png.txt"
mv "$T/png.txt" "$FX/png/list.txt"
args=(pack "$FX/png/list.txt" --encode raw --compress none --shard-size 4K --on-error skip --quiet)
"$P" "${args[@]}" "$O/sref" --report "$T/sref.tsv" 2>/dev/null || fail "skip-mode reference"
for k in 2 6 9; do
    d="$O/s$k"
    PACKDATA_TEST_KILL_AFTER=$k "$P" "${args[@]}" "$d" --report "$T/s$k.tsv" 2>/dev/null
    [[ $? -eq 137 ]] || fail "skip-mode kill after $k"
    expect_status 0 "skip-mode resume $k" -- "$P" "${args[@]}" "$d" --report "$T/s$k.tsv" --resume
    for s in "$O"/sref/*.fls; do cmp -s "$s" "$d/$(basename "$s")" || fail "skip-mode resume $k: $(basename "$s") differs"; done
    [[ $(wc -l <"$T/s$k.tsv") -eq 3 ]] || fail "skip-mode resume $k: report has $(wc -l <"$T/s$k.tsv") lines, want 3"
    [[ ! -e $d.partial.skips ]] || fail "skip journal left behind"
done
pass "skip mode + kill + resume"
finish
