#!/usr/bin/env bash
# test_parts.sh — a job packed in parts (`--part I/N`, as a Slurm array would) loads as one dataset:
# a directory holding the N part datasets opens with the same records, in the same order, as one
# uninterrupted pack; a missing or duplicated part is a clear error.
. "$(dirname "$0")/lib.sh"
O="$T/o"
mkdir -p "$O/job"
"$P" pack "$FX/cifar10" "$O/whole" --split train --shuffle --seed 3 --shard-size 4K --quiet 2>/dev/null || fail "whole pack"
for i in 0 1 2; do
    "$P" pack "$FX/cifar10" "$O/job/part-$i" --split train --shuffle --seed 3 --shard-size 4K --part $i/3 --quiet 2>/dev/null \
        || fail "pack part $i/3"
done
expect_status 0 "info on the parts directory" -- "$P" info "$O/job" --json
n_whole=$("$P" info "$O/whole" --json | grep -o '"records":[0-9]*' | head -1)
grep -q "$n_whole" "$T/out" || fail "parts hold another record count than the whole: $(head -c 200 "$T/out")"
expect_status 0 "verify the parts directory" -- "$P" verify "$O/job"
# every record, in order: same stored payload, label and name
n=$(sed -E 's/"records"://' <<<"$n_whole")
for idx in 0 1 $((n / 3)) $((n / 2)) $((n - 1)); do
    "$P" extract "$O/whole" "$idx" -o "$T/a.png" 2>/dev/null || fail "extract whole $idx"
    "$P" extract "$O/job" "$idx" -o "$T/b.png" 2>/dev/null || fail "extract parts $idx"
    cmp -s "$T/a.png" "$T/b.png" || fail "record $idx differs between the whole pack and the parts"
done
# the loader reads the parts' shards with every I/O mode (regression: a part's shards are numbered
# from 0 in their headers, and reads went to the wrong file)
FLT="$B/tools/fastload/fastload"
if [[ -x "$FLT" ]]; then
    want=$("$FLT" digest "$O/whole" --order seq --batch 7 --workers 2 --io pread 2>&1 | tail -1)
    for io in pread uring mmap auto; do
        got=$("$FLT" digest "$O/job" --order seq --batch 7 --workers 2 --io $io 2>&1 | tail -1)
        [[ "$got" == "$want" ]] || fail "fastload digest of the parts with --io $io: '$got', want '$want'"
    done
fi
pass "parts open as one dataset, records in the same order"

mv "$O/job/part-1" "$O/part-1.away"
expect_status 1 "a missing part" -- "$P" info "$O/job"
expect_err "2 part dataset(s) found, their manifests say 3 parts" "missing part named"
cp -r "$O/job/part-0" "$O/job/part-1"
expect_status 1 "a duplicated part" -- "$P" info "$O/job"
expect_err "part 1 of 3 is missing or duplicated" "duplicated part named"
pass "missing and duplicated parts are clear errors"
finish
