#!/usr/bin/env bash
# test_resume_changed.sh — `--resume` continues only the job DST.partial was started for. After a kill -9, SRC or the options are changed: inputs added, one grown, one
# touched, one removed, another SRC, another option, another class name; an IDX source whose
# pixels changed. Each resume is refused with exit 2 saying what changed, and DST.partial is left
# byte-identical; once SRC is back as it was, --resume finishes and the result equals an
# uninterrupted pack. The finished manifest records the inputs' count and SHA-256.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX"
FIX="$B/tests/packdata/pd_fixture"
need "$FIX"
"$FIX" make "$T/fx" >/dev/null || die "fixture"
fingerprint() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0r sha256sum); }

# an ImageFolder source (PNG files), small shards, killed after 4 records
cp -r "$T/fx/png" "$T/src"
rm -f "$T/src/list.txt"
args=(--encode keep --shard-size 4K --quiet)
"$P" pack "$T/src" "$T/ref" "${args[@]}" 2>"$T/err" || die "reference: $(cat "$T/err")"
grep -q '"inputs": *{"count": *[0-9]*, *"sha256": *"[0-9a-f]\{64\}"}' "$T/ref/manifest.json" ||
    fail "the manifest records no inputs digest: $(grep -o '"options".*' "$T/ref/manifest.json" | head -c 300)"
PACKDATA_TEST_KILL_AFTER=4 "$P" pack "$T/src" "$T/dst" "${args[@]}" 2>/dev/null
[[ $? -eq 137 && -d $T/dst.partial ]] || die "the kill left no DST.partial"
partial=$(fingerprint "$T/dst.partial")

# resume_refused WHAT MESSAGE [args]: exit 2, stderr holds MESSAGE, DST.partial unchanged
resume_refused() {
    local what=$1 msg=$2
    shift 2
    expect_status 2 "$what: --resume refused" -- "$P" pack "$T/src" "$T/dst" "${args[@]}" --resume "$@" &&
        expect_err "$msg" "$what: says what changed"
    [[ $partial == "$(fingerprint "$T/dst.partial")" ]] || fail "$what: DST.partial changed"
    [[ ! -e $T/dst ]] || fail "$what: DST appeared"
}
first=$(cd "$T/src" && ls 0cat | head -1)
cp "$T/src/0cat/$first" "$T/src/0cat/zz_added1.png"
cp "$T/src/0cat/$first" "$T/src/1dog/zz_added2.png"
resume_refused "2 inputs added" "2 inputs added, first: "
rm "$T/src/0cat/zz_added1.png" "$T/src/1dog/zz_added2.png"
cp -p "$T/src/0cat/$first" "$T/keep.png"
printf 'x' >>"$T/src/0cat/$first"
resume_refused "one input grew" "0cat/$first changed size"
cp -p "$T/keep.png" "$T/src/0cat/$first"
touch -d '2001-01-01' "$T/src/0cat/$first"
resume_refused "one input touched" "0cat/$first was modified"
mv "$T/src/0cat/$first" "$T/moved.png"
resume_refused "one input removed" "1 input removed, first: 0cat/$first"
mv "$T/moved.png" "$T/src/0cat/$first"
resume_refused "another option" 'option "shard_size" differs: 4096 in the interrupted run, 8192 now' --shard-size 8K
resume_refused "another option (shuffle)" 'option "shuffle" differs' --shuffle
expect_status 2 "another SRC: --resume refused" -- "$P" pack "$T/fx/jpg" "$T/dst" "${args[@]}" --resume &&
    expect_err "another source" "another SRC is named"
[[ $partial == "$(fingerprint "$T/dst.partial")" ]] || fail "another SRC: DST.partial changed"
mv "$T/src/1dog" "$T/src/1wolf"
resume_refused "a class renamed" 'class 1 was "1dog", now "1wolf"'
mv "$T/src/1wolf" "$T/src/1dog"
pass "--resume over changed inputs/options is refused (exit 2, what changed is named, DST.partial untouched)"

# back as it was (the touched file's time restored from the copy): --resume finishes
touch -r "$T/keep.png" "$T/src/0cat/$first"
expect_status 0 "--resume over the same inputs" -- "$P" pack "$T/src" "$T/dst" "${args[@]}" --resume
msg=$(same_dataset "$T/ref" "$T/dst") || fail "resumed dataset differs from the uninterrupted pack: $msg"
pass "--resume over the same inputs = the uninterrupted pack"

# IDX source: pixels change in place (same file names, same count)
"$MKIDX" "$T/idx" 600 >/dev/null || die "idx fixture"
iargs=(--compress none --shard-size 64K --quiet)
PACKDATA_TEST_KILL_AFTER=100 "$P" pack "$T/idx" "$T/idst" "${iargs[@]}" 2>/dev/null
[[ $? -eq 137 && -d $T/idst.partial ]] || die "IDX kill left no DST.partial"
cp -r "$T/idx" "$T/idx.keep"
"$MKIDX" "$T/idx" 600 28 28 7 >/dev/null || die "idx fixture 2"
expect_status 2 "IDX pixels changed: --resume refused" -- "$P" pack "$T/idx" "$T/idst" "${iargs[@]}" --resume &&
    expect_err "was modified" "IDX change named"
rm -r "$T/idx"
mv "$T/idx.keep" "$T/idx"
expect_status 0 "IDX --resume over the same file" -- "$P" pack "$T/idx" "$T/idst" "${iargs[@]}" --resume
expect_status 0 "IDX verify" -- "$P" verify "$T/idst"
pass "IDX: changed pixels refused, same file resumed"

# LMDB backend: the same check
PACKDATA_TEST_KILL_AFTER=100 "$P" pack "$T/idx" "$T/ldst" --backend lmdb --compress none --quiet 2>/dev/null
[[ $? -eq 137 && -d $T/ldst.partial ]] || die "LMDB kill left no DST.partial"
expect_status 2 "LMDB: --resume with another seed refused" -- "$P" pack "$T/idx" "$T/ldst" --backend lmdb --compress none --quiet --resume --shuffle --seed 4 &&
    expect_err 'option "shuffle" differs' "LMDB: option named"
expect_status 0 "LMDB: --resume with the same options" -- "$P" pack "$T/idx" "$T/ldst" --backend lmdb --compress none --quiet --resume
expect_status 0 "LMDB verify" -- "$P" verify "$T/ldst"
pass "LMDB: --resume checks the job too"
finish
