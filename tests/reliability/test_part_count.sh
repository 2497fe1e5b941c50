#!/usr/bin/env bash
# test_part_count.sh — `pack --part I/N` with N above the number of inputs: a part with no input
# could never join the others (the directory of parts would not open: "3 part dataset(s) found,
# their manifests say 5 parts"), so every part of such a job is refused up front (exit 2, saying
# the largest N that works) and nothing is written; with N = the number of inputs every part
# has one and the parts directory opens as one dataset.
. "$(dirname "$0")/lib.sh"
need "$P" "$FLT" "$MKIDX"
"$MKIDX" "$T/idx" 3 >/dev/null || die "fixture"
mkdir -p "$T/job5" "$T/job3"
for i in 0 1 2 3 4; do
    expect_status 2 "--part $i/5 of 3 inputs" -- "$P" pack "$T/idx" "$T/job5/part-$i" --part $i/5 --quiet &&
        expect_err "3 inputs" "--part $i/5: names the number of inputs" &&
        expect_err "at most 3" "--part $i/5: says which N works"
    [[ -e $T/job5/part-$i ]] && fail "--part $i/5 refused but left $T/job5/part-$i"
done
[[ -d $T/job5 ]] && [[ -n $(ls -A "$T/job5") ]] && fail "refused parts left files: $(ls "$T/job5")"
pass "--part I/5 of 3 inputs: refused before anything was written: $(grep error: "$T/err" | head -1)"
for i in 0 1 2; do
    expect_status 0 "--part $i/3 of 3 inputs" -- "$P" pack "$T/idx" "$T/job3/part-$i" --part $i/3 --quiet
done
"$P" pack "$T/idx" "$T/whole" --quiet 2>"$T/err" || die "whole pack: $(cat "$T/err")"
want=$("$FLT" digest "$T/whole" 2>/dev/null)
got=$("$FLT" digest "$T/job3" 2>"$T/err")
[[ -n $want && $got == "$want" ]] && pass "the 3 parts open as one dataset, same records as the whole" ||
    fail "parts digest '$got' ($(head -1 "$T/err")), want '$want'"
finish
