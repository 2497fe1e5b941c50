#!/usr/bin/env bash
# test_input_listing.sh — problems with one input never
# abort a --on-error skip run, and the listing says what it leaves out.
#  - a symbolic link loop in an ImageFolder (a folder linking to its parent, a link to itself):
#    with --on-error skip reported and skipped (exit 0, the rest packed); without it exit 1 with
#    one error naming the link (it used to abort with exit 2 "folders nested too deep");
#  - an empty class folder (an earlier output inside SRC, a folder with no images) is skipped
#    with a warning naming it and saying how to keep it (--classes FILE), where it silently
#    became a class with no examples; with --classes it stays a class;
#  - an image --encode jpeg cannot store (a side over 65500) is a bad input, not a fatal error;
#  - a UTF-8 byte order mark at the start of a list file (or CSV, or --classes file) is not part
#    of the first path (class name).
. "$(dirname "$0")/lib.sh"
O="$T/o"
S="$T/src"
mkdir -p "$O" "$S/cat" "$S/dog"
cp "$FX"/png/0cat/*.png "$S/cat/"
n_img=$(ls "$S/cat" | wc -l)
[[ $n_img -gt 0 ]] || { echo "FAIL: no PNG fixtures found in $FX"; exit 1; }
cp "$S/cat/"* "$S/dog/"
count() { "$P" info "$1" --json | grep -o '"records":[0-9]*' | cut -d: -f2; }
classes() { "$P" info "$1" --json | grep -o '"classes":\[[^]]*\]'; }

# ---- symbolic link loops
ln -s .. "$S/cat/up"          # a folder that leads back to SRC
ln -s self "$S/dog/self"      # a link to itself (stat: ELOOP)
expect_status 0 "symlink loops with --on-error skip" -- "$P" pack "$S" "$O/loop-skip" --on-error skip --report "$O/loop.tsv" && {
    expect_err "cat/up" "skip names the folder loop"
    expect_err "dog/self" "skip names the self link"
    [[ $(count "$O/loop-skip") -eq $((2 * n_img)) ]] || fail "symlink loop skip: $(count "$O/loop-skip") records, want $((2 * n_img))"
    [[ $(wc -l <"$O/loop.tsv") -eq 2 ]] || fail "report should list the 2 loops: $(cat "$O/loop.tsv")"
}
expect_status 1 "symlink loop without skip" -- "$P" pack "$S" "$O/loop-fail" &&
    expect_err "cat/up" "the error names the loop" && expect_err "loop" "the error says loop"
[[ $(grep -c 'error' "$T/err") -eq 1 ]] || fail "want one error line: $(cat "$T/err")"
[[ -e "$O/loop-fail" ]] && fail "a failed run left $O/loop-fail"
rm "$S/cat/up" "$S/dog/self"
# an image-named link to itself is a bad input like any unreadable file
ln -s x.png "$S/dog/x.png"
expect_status 0 "image link loop with skip" -- "$P" pack "$S" "$O/loop2" --on-error skip && expect_err "dog/x.png" "skip names x.png"
expect_status 1 "image link loop without skip" -- "$P" pack "$S" "$O/loop3" && expect_err "dog/x.png" "error names x.png"
rm "$S/dog/x.png"

# ---- an image --encode jpeg cannot store (wider than JPEG's 65500 limit): a bad input, skipped
# with --on-error skip (it used to stop the run even then: "JPEG encoding failed")
if /usr/bin/python3 -c "import PIL" 2>/dev/null; then
    /usr/bin/python3 -c "
from PIL import Image
Image.new('RGB', (66000, 2), (9, 99, 199)).save('$S/dog/wide.png')"
    expect_status 0 "too wide for JPEG, with skip" -- "$P" pack "$S" "$O/wide" --encode jpeg --on-error skip &&
        expect_err "wide.png" "skip names the wide image"
    expect_status 1 "too wide for JPEG, without skip" -- "$P" pack "$S" "$O/wide2" --encode jpeg &&
        expect_err "wide.png" "the error names the wide image"
    rm "$S/dog/wide.png"
fi

# ---- empty class folders
mkdir -p "$S/empty" "$S/old-output"
echo '{}' >"$S/old-output/manifest.json"
expect_status 0 "empty class folders" -- "$P" pack "$S" "$O/e1" && {
    expect_err "empty" "warning names the empty folder"
    expect_err "old-output" "warning names the old output"
    expect_err "--classes" "warning says how to keep it"
    [[ $(classes "$O/e1") == '"classes":["cat","dog"]' ]] || fail "empty folders became classes: $(classes "$O/e1")"
}
printf 'cat\ndog\nempty\nold-output\n' >"$O/classes.txt"
expect_status 0 "--classes keeps empty class folders" -- "$P" pack "$S" "$O/e2" --classes "$O/classes.txt" &&
    { [[ $(classes "$O/e2") == '"classes":["cat","dog","empty","old-output"]' ]] || fail "--classes: $(classes "$O/e2")"; }
printf '\xef\xbb\xbfcat\ndog\nempty\nold-output\n' >"$O/classes-bom.txt" # a BOM in the --classes file
expect_status 0 "--classes file with a BOM" -- "$P" pack "$S" "$O/e4" --classes "$O/classes-bom.txt" &&
    { [[ $(classes "$O/e4") == '"classes":["cat","dog","empty","old-output"]' ]] || fail "--classes with a BOM: $(classes "$O/e4")"; }
printf 'cat\ndog\n' >"$O/classes2.txt"
expect_status 2 "--classes missing a folder" -- "$P" pack "$S" "$O/e3" --classes "$O/classes2.txt" &&
    expect_err "empty" "refusal names the folder"
rm -r "$S/empty" "$S/old-output"

# ---- a UTF-8 BOM in a list file
first=$(ls "$S/cat" | head -1)
printf '\xef\xbb\xbfcat/%s 0\ndog/%s 1\n' "$first" "$first" >"$S/list.txt"
expect_status 0 "list file with a BOM" -- "$P" pack "$S/list.txt" "$O/bom" &&
    { [[ $(count "$O/bom") -eq 2 ]] || fail "BOM list: $(count "$O/bom") records, want 2"; }
printf '\xef\xbb\xbfpath,label\ncat/%s,0\ndog/%s,1\n' "$first" "$first" >"$S/list.csv"
expect_status 0 "CSV with a BOM" -- "$P" pack "$S/list.csv" "$O/bomcsv" &&
    { [[ $(count "$O/bomcsv") -eq 2 ]] || fail "BOM CSV: $(count "$O/bomcsv") records, want 2"; }

pass "input listing: loops reported, empty classes named, BOM stripped"
finish
