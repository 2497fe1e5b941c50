#!/usr/bin/env bash
# test_bad_inputs.sh — every bad input gets one clear message naming the file (or list line) and
# the reason; --on-error fail exits 1 and leaves nothing at DST; --on-error skip packs the rest,
# reports every skip and exits 0; usage errors exit 2; DST / DST.partial protection.
. "$(dirname "$0")/lib.sh"
O="$T/o"
mkdir -p "$O"
cp -r "$FX/bad" "$T/b"
good="$T/b/good one.png"

# one list per bad input: "<file> <label>" plus the good file first
check_bad() { # name listline source reason [extra pack args]
    local name=$1 line=$2 src=$3 why=$4 want="$3: $4"
    shift 4
    printf '%s\n%s\n' "good one.png 0" "$line" >"$T/b/$name.txt"
    local d="$O/$name"
    expect_status 1 "$name (fail mode)" -- "$P" pack "$T/b/$name.txt" "$d" --quiet --encode raw "$@" || return
    expect_err "$want" "$name message" || return
    [[ ! -e $d && ! -e $d.partial ]] || { fail "$name: fail mode left $d or $d.partial"; return; }
    [[ $(grep -c . "$T/err") -le 3 ]] || fail "$name: more than one line of error: $(cat "$T/err")"
    # skip mode: the good image is packed, the bad one reported
    expect_status 0 "$name (skip mode)" -- "$P" pack "$T/b/$name.txt" "$d" --quiet --encode raw --on-error skip --report "$T/$name.tsv" "$@" || return
    [[ -d $d ]] || { fail "$name: skip mode did not produce $d"; return; }
    "$P" info "$d" --json | grep -q '"records":1,' || fail "$name: skip mode should pack exactly the good image"
    if [[ $(wc -l <"$T/$name.tsv") -eq 1 ]] && grep -qF -- "$src"$'\t'"$why" "$T/$name.tsv"; then
        pass "$name"
    else
        fail "$name: report lacks the entry: $(cat "$T/$name.tsv")"
    fi
}

check_bad missing "nothere.jpg 1" "nothere.jpg" "missing file"
check_bad empty "empty.jpg 1" "empty.jpg" "empty file"
check_bad notimage "text.jpg 1" "text.jpg" "not a JPEG, PNG or WebP image"
check_bad truncjpeg "trunc.jpg 1" "trunc.jpg" "truncated JPEG"
check_bad truncpng "trunc.png 1" "trunc.png" "truncated PNG"
check_bad huge "huge.png 1" "huge.png" "declared size 100000x100000"
check_bad badlabel "trunc.png cat" "badlabel.txt:2" "label 'cat' is not a number"
check_bad rangelabel "trunc.png 7" "rangelabel.txt:2" "label 7 is out of range (3 classes: 0..2)" --num-classes 3
check_bad duplicate "good one.png 1" "duplicate.txt:2" "duplicate entry: good one.png is listed twice"
# the same file spelled with "." components or doubled slashes (was packed twice, two labels)
check_bad dupdot "./good one.png 1" "dupdot.txt:2" "duplicate entry: ./good one.png is listed twice"
check_bad dupslash ".//./good one.png 1" "dupslash.txt:2" "duplicate entry: .//./good one.png is listed twice"
check_bad nolabel "trunc.png" "nolabel.txt:2" "expected \"path label\""
check_bad smallpix "trunc.png 0" "trunc.png" "declared size 64x48 (3072 pixels) is over --max-pixels 1000" --max-pixels 1000

# the huge image is refused before any allocation: a tight address-space limit still passes
# (skipped under ASan, which reserves huge shadow memory)
if [[ "${FL_SANITIZE:-OFF}" != ON ]]; then
    printf 'huge.png 0\n' >"$T/b/huge1.txt"
    (ulimit -v 400000; "$P" pack "$T/b/huge1.txt" "$O/h1" --quiet --encode jpeg 2>"$T/err")
    [[ $? -eq 1 ]] && expect_err "over --max-pixels" "huge under ulimit" && pass "huge declared size refused without allocating"
fi

# skip mode with every kind at once: all reported, exit 0
printf '%s\n' "good one.png 0" "nothere.jpg 1" "empty.jpg 1" "text.jpg 1" "trunc.jpg 1" "trunc.png 1" \
    "huge.png 0" "x.png notanumber" "good one.png 1" >"$T/b/all.txt"
expect_status 0 "skip all kinds" -- "$P" pack "$T/b/all.txt" "$O/all" --on-error skip --report "$T/all.tsv" --quiet --encode jpeg
[[ $(wc -l <"$T/all.tsv") -eq 8 ]] || fail "report should list 8 skips: $(cat "$T/all.tsv")"
"$P" info "$O/all" --json | grep -q '"records":1,' || fail "skip all kinds: want 1 record"
pass "skip mode reports every bad input"

# CSV errors name the CSV line
printf 'path,label\n"good one.png",0\n"trunc.png",x\n' >"$T/b/bad.csv"
expect_status 1 "csv bad label" -- "$P" pack --csv "$T/b/bad.csv" "$O/csv" --quiet
expect_err "bad.csv:3: label 'x' is not a number" "csv line named"
printf 'file,label\n' >"$T/b/nocol.csv"
expect_status 2 "csv missing column" -- "$P" pack --csv "$T/b/nocol.csv" "$O/csv" --quiet
expect_err "no column named 'path'" "csv missing column named"
pass "CSV errors"

# IDX: truncated image file, mismatched counts
expect_status 1 "idx truncated" -- "$P" pack --idx "$FX/idx-trunc-images" "$FX/idx-plain-labels" "$O/idx" --quiet
expect_err "idx-trunc-images: truncated" "idx truncated named"
expect_status 1 "idx wrong magic" -- "$P" pack --idx "$FX/idx-plain-labels" "$FX/idx-plain-labels" "$O/idx" --quiet
expect_err "idx-plain-labels: not an IDX image file" "idx magic named"
head -c 100 "$FX/cifar10/test_batch.bin" >"$T/b/short.bin"
expect_status 1 "cifar truncated" -- "$P" pack "$T/b/short.bin" "$O/cif" --quiet
expect_err "short.bin: 100 bytes is not a whole number" "cifar truncated named"
expect_status 2 "cifar needs split" -- "$P" pack "$FX/cifar10" "$O/cif" --quiet
expect_err "--split train or --split test" "cifar split hint"
pass "IDX/CIFAR errors"

# keep with mixed JPEG + PNG: each kept in its format (this used to fail;
# test_mixed_formats.sh covers it fully)
mkdir -p "$T/mix/0a"
cp "$FX/jpg/0cat/img_0.jpg" "$T/mix/0a/a.jpg"
cp "$FX/png/0cat/img_1.png" "$T/mix/0a/b.png"
expect_status 0 "keep mixed formats" -- "$P" pack "$T/mix" "$O/mix" --quiet --encode keep
expect_status 0 "mixed with --encode jpeg" -- "$P" pack "$T/mix" "$O/mixj" --quiet --encode jpeg
pass "keep stores mixed formats"

# a PNG named .jpg packs under keep (format sniffed from the bytes); raw of varying sizes needs --resize
expect_status 0 "lying extension" -- "$P" pack "$FX/liar" "$O/liar" --quiet --encode keep
"$P" info "$O/liar" --json | grep -q '"encoding":"png"' || fail "liar: encoding should be png"
expect_status 1 "raw varying sizes" -- "$P" pack "$FX/jpg" "$O/var" --quiet --encode raw
expect_err "pass --resize WxH" "raw varying sizes hint"
pass "lying extension, raw sizes"

# DST protection and usage errors
expect_status 1 "DST exists" -- "$P" pack "$FX/png" "$O/liar" --quiet
expect_err "already exists: pass --force" "DST exists message"
expect_status 0 "--force replaces" -- "$P" pack "$FX/png" "$O/liar" --quiet --force
"$P" info "$O/liar" --json | grep -q '"records":12,' || fail "--force did not replace the dataset"
mkdir -p "$O/stale.partial"
expect_status 1 "stale partial" -- "$P" pack "$FX/png" "$O/stale" --quiet
expect_err "pass --resume to finish it" "stale partial message"
expect_status 0 "stale partial --force" -- "$P" pack "$FX/png" "$O/stale" --quiet --force
expect_status 2 "unknown option" -- "$P" pack "$FX/png" "$O/u" --bogus
expect_err "unknown option '--bogus'" "unknown option named"
expect_status 2 "bad --part" -- "$P" pack "$FX/png" "$O/u" --part 3/3
expect_status 2 "bad --encode" -- "$P" pack "$FX/png" "$O/u" --encode gif
expect_status 2 "keep of IDX" -- "$P" pack "$FX/idx" "$O/u" --encode keep
expect_status 2 "no args" -- "$P" pack
expect_status 2 "unknown command" -- "$P" frobnicate
expect_status 1 "missing SRC" -- "$P" pack "$T/nope" "$O/u"
expect_err "$T/nope" "missing SRC named"
for sub in "" pack info verify extract; do
    expect_status 0 "help $sub" -- "$P" $sub --help
    grep -q usage "$T/out" || fail "$sub --help prints usage"
    expect_status 0 "version $sub" -- "$P" $sub --version
    grep -q "packdata (fastload)" "$T/out" || fail "$sub --version"
done
pass "DST protection, usage errors, --help/--version"
finish
