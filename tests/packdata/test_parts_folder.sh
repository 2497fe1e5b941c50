#!/usr/bin/env bash
# test_parts_folder.sh — `--part I/N` over an ImageFolder, where a task lists only its own slice:
# the parts of every N (1, 2, 3, 4, all inputs; also with --shuffle) hold exactly the records of
# one uninterrupted pack, in order; under --encode keep the parts agree on the stored format from
# the job's file names (mixed extensions: mixed; a PNG named .jpg in a .jpg job: the part holding
# it refuses it, naming the file); a task opens none of the other parts' files; `--resume` of a
# complete part exits 0 without opening any source file, and still refuses when one of its own
# inputs changed. A killed pack leaves its plan's short form in DST.partial/plan.txt and the whole
# plan in DST.partial.plan (which names a changed input on a refused --resume, and goes when the
# dataset is complete).
. "$(dirname "$0")/lib.sh"
die() { echo "FAIL: $*"; exit 1; }
S="$T/src"
jpgs=("$FX"/jpg/*/*.jpg)
k=0
for c in 0cat 1dog "2 été x"; do
    mkdir -p "$S/$c"
    for i in 0 1 2 3 4 5 6; do
        cp "${jpgs[$((k % ${#jpgs[@]}))]}" "$S/$c/f_$i.jpg"
        k=$((k + 1))
    done
done
n=21
recs() { "$P" info "$1" --json 2>/dev/null | grep -o '"records":[0-9]*' | head -1 | cut -d: -f2; }
enc() { "$P" info "$1" --json 2>/dev/null | grep -o '"encoding":"[a-z]*"' | head -1 | cut -d'"' -f4; }
# same_records A B: A and B hold the same records in the same order: the loader's digest of every
# record in order (decoded pixels and labels) when fastload is built, else every stored payload
FLT="$B/tools/fastload/fastload"
same_records() {
    if [[ -x $FLT ]]; then
        local a b
        a=$("$FLT" digest "$1" --order seq --batch 1 --size 16 --workers 1 2>&1 | tail -1)
        b=$("$FLT" digest "$2" --order seq --batch 1 --size 16 --workers 1 2>&1 | tail -1)
        [[ -n $a && $a == "$b" ]]
        return
    fi
    local i
    for ((i = 0; i < n; i++)); do
        "$P" extract "$1" "$i" -o "$T/a.bin" 2>/dev/null || return 1
        "$P" extract "$2" "$i" -o "$T/b.bin" 2>/dev/null || return 1
        cmp -s "$T/a.bin" "$T/b.bin" || return 1
    done
}

"$P" pack "$S" "$T/whole" --shard-size 4K --quiet || die "whole pack"
for N in 1 2 3 4 $n; do
    mkdir -p "$T/j$N"
    for ((i = 0; i < N; i++)); do
        "$P" pack "$S" "$T/j$N/part-$i" --shard-size 4K --part $i/$N --quiet 2>"$T/err" ||
            fail "pack part $i/$N: $(cat "$T/err")"
    done
    [[ $(recs "$T/j$N") == "$n" ]] || fail "$N parts hold $(recs "$T/j$N") records, want $n"
    same_records "$T/whole" "$T/j$N" || fail "$N parts: a record differs from the whole pack"
done
"$P" pack "$S" "$T/wshuf" --shard-size 4K --shuffle --seed 5 --quiet || die "shuffled pack"
mkdir -p "$T/jshuf" "$T/mj" "$T/lj"
for i in 0 1 2; do
    "$P" pack "$S" "$T/jshuf/part-$i" --shard-size 4K --shuffle --seed 5 --part $i/3 --quiet ||
        fail "shuffled part $i/3"
done
same_records "$T/wshuf" "$T/jshuf" || fail "--shuffle: the parts differ from the whole pack"
expect_status 2 "more parts than inputs" -- "$P" pack "$S" "$T/x" --part 0/22 &&
    expect_err "has 21 inputs, so a job can have at most 21 parts" "the input count is named"
pass "ImageFolder parts (N = 1, 2, 3, 4, 21; --shuffle) equal one pack, record for record"

# the stored format under keep: from the job's names, the same in every part
cp "$FX/png/1dog/img_10.png" "$S/1dog/f_7.png"
n=22
"$P" pack "$S" "$T/mwhole" --shard-size 4K --quiet || die "mixed whole pack"
for i in 0 1 2; do
    "$P" pack "$S" "$T/mj/part-$i" --shard-size 4K --part $i/3 --quiet 2>"$T/err" ||
        fail "mixed part $i/3: $(cat "$T/err")"
    [[ $(enc "$T/mj/part-$i") == mixed ]] || fail "part $i/3 of a .jpg + .png job is $(enc "$T/mj/part-$i"), want mixed"
done
[[ $(recs "$T/mj") == "$n" ]] && same_records "$T/mwhole" "$T/mj" || fail "mixed parts differ from the whole pack"
rm "$S/1dog/f_7.png"
cp "$FX/png/1dog/img_10.png" "$S/2 été x/f_7.jpg" # PNG bytes, a .jpg name
"$P" pack "$S" "$T/lwhole" --shard-size 4K --quiet || fail "one process keeps a PNG named .jpg"
"$P" pack "$S" "$T/lj/part-0" --shard-size 4K --part 0/3 --quiet || fail "part 0/3 without the liar"
expect_status 1 "a PNG named .jpg in a part" -- "$P" pack "$S" "$T/lj/part-2" --shard-size 4K --part 2/3 &&
    expect_err "f_7.jpg: is a PNG image, but under --part the stored format is decided from the names" "the file and the rule are named"
rm "$S/2 été x/f_7.jpg"
n=21
pass "keep under --part: mixed names make mixed parts; a file whose bytes contradict the job's names is refused"

if command -v strace >/dev/null 2>&1; then
    # LeakSanitizer cannot run under ptrace
    export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
    # part 0/3 is 0cat: its task opens no file of 1dog or "2 été x" (no sniffing of the whole job)
    rm -rf "$T/s0"
    strace -f -qq -e trace=open,openat -o "$T/trace" "$P" pack "$S" "$T/s0" --shard-size 4K --part 0/3 --quiet ||
        fail "part 0/3 under strace"
    grep -F -e "/1dog/f_" -e "/2 été x/f_" "$T/trace" | head -3 >"$T/other"
    [[ -s $T/other ]] && fail "part 0/3 opened other parts' files: $(cat "$T/other")"
    grep -qF "/0cat/f_6.jpg" "$T/trace" || fail "the trace does not show part 0/3 reading its own files"
    # --resume of the complete part: exit 0, no source file opened
    strace -f -qq -e trace=open,openat -o "$T/trace" "$P" pack "$S" "$T/s0" --shard-size 4K --part 0/3 --resume >"$T/out" 2>"$T/err" ||
        fail "--resume of a complete part: $(cat "$T/err")"
    grep -q "already complete" "$T/out" || fail "--resume of a complete part does not say so: $(cat "$T/out")"
    grep -F "/f_" "$T/trace" | head -3 >"$T/other"
    [[ -s $T/other ]] && fail "--resume of a complete part opened source files: $(cat "$T/other")"
    pass "a part task opens only its own files; --resume of a complete part opens none"
else
    echo "skip: strace not installed (the file-open checks)"
fi
# a complete part's check still covers its own inputs
touch -d '2001-01-01' "$S/0cat/f_3.jpg"
expect_status 2 "--resume of a part whose input changed" -- "$P" pack "$S" "$T/j3/part-0" --shard-size 4K --part 0/3 --resume &&
    expect_err "inputs changed since it was packed" "the change is named"
expect_status 0 "--resume of another part (its inputs unchanged)" -- "$P" pack "$S" "$T/j3/part-1" --shard-size 4K --part 1/3 --resume &&
    grep -q "already complete" "$T/out" || fail "part 1/3 not complete: $(cat "$T/out" "$T/err")"
pass "--resume of a complete part checks its own inputs"

# the plan: its short form in DST.partial/plan.txt, the whole plan beside DST.partial
touch -d '2001-01-01' "$S/0cat/f_3.jpg"
PACKDATA_TEST_KILL_AFTER=5 "$P" pack "$S" "$T/k" --shard-size 4K --quiet 2>/dev/null
[[ -f $T/k.partial/plan.txt && -f $T/k.partial.plan ]] || fail "a killed pack left no plan: $(ls "$T")"
grep -q "^inputs	21	[0-9a-f]\{64\}$" "$T/k.partial/plan.txt" || fail "plan.txt is not the short form: $(head -c 300 "$T/k.partial/plan.txt")"
[[ $(grep -c "^input	" "$T/k.partial.plan") == 21 ]] || fail "DST.partial.plan does not list the 21 inputs"
touch "$S/0cat/f_3.jpg"
expect_status 2 "--resume after an input changed" -- "$P" pack "$S" "$T/k" --shard-size 4K --resume &&
    expect_err "0cat/f_3.jpg was modified" "the whole plan names the changed input"
mv "$T/k.partial.plan" "$T/k.plan.away"
expect_status 2 "--resume after an input changed, the whole plan gone" -- "$P" pack "$S" "$T/k" --shard-size 4K --resume &&
    expect_err "its inputs changed since it was started" "the short plan still refuses"
touch -d '2001-01-01' "$S/0cat/f_3.jpg"
mv "$T/k.plan.away" "$T/k.partial.plan"
expect_status 0 "--resume of the same job" -- "$P" pack "$S" "$T/k" --shard-size 4K --resume --quiet
[[ ! -e $T/k.partial.plan && ! -e $T/k.partial ]] || fail "the plan or the partial outlived the complete dataset"
same_records "$T/whole" "$T/k" || fail "the resumed pack differs from the whole pack"
pass "a killed pack's plan: short form inside DST.partial, the whole plan beside it, gone once complete"
finish
