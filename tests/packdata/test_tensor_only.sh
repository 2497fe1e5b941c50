#!/bin/bash
# test_tensor_only.sh — records without an image (`packdata pack --no-image`): JSON Lines and CSV
# rows of float_vector, ndarray (.npy files and nested lists), int_list, text, float and a label
# packed into shards and LMDB, and what libfastload delivers (pd_fields_dump) equal to every row,
# value for value; --on-error skip naming FILE:LINE and why; info, verify, extract; a kill + --resume
# and --part 0/2 + 1/2 giving the same batches as one pack; the error without the option naming
# it, and the usage errors.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
HERE="$(cd "$(dirname "$0")" && pwd)"
DUMP="$B/tests/packdata/pd_fields_dump"
FLT="$B/tools/fastload/fastload"
[[ -x "$DUMP" && -x "$FLT" ]] || { echo "SKIP: pd_fields_dump / fastload not built"; exit 77; }
"$PY" -c "import numpy" 2>/dev/null || { echo "SKIP: /usr/bin/python3 lacks numpy"; exit 77; }
D="$T/rows"
"$PY" "$HERE/tensor_only.py" gen "$D" || { echo "FAIL: tensor_only.py gen"; exit 1; }
FIELDS=(--field emb:float_vector:8 --field arr:ndarray:float32:2x3 --field m:ndarray:int16:4
        --field ids:int_list --field cap:text --field score:float)

# pack KIND DST [options]: --no-image with every field, bad rows skipped into DST.report
pack() {
    local kind=$1 dst=$2; shift 2
    "$P" pack --"$kind" "$D/meta.$kind" "$dst" --no-image "${FIELDS[@]}" --on-error skip \
        --report "$dst.report" --workers 2 "$@" 2>"$dst.err"
}
# dumped DST KIND WHAT: the loader's samples equal the good rows of meta.KIND
dumped() {
    if "$DUMP" "$1" >"$1.dump" 2>"$T/dump.err" && "$PY" "$HERE/tensor_only.py" check "$2" "$D" "$1.dump" >"$T/chk" 2>&1; then
        pass "$3: the loader delivers every row's values exactly"
    else
        fail "$3: $(head -c 600 "$T/dump.err" "$T/chk")"
    fi
}
# has FILE TEXT WHAT: FILE holds TEXT
has() { grep -qF -- "$2" "$1" && pass "$3" || fail "$3: $1 lacks '$2': $(head -c 400 "$1")"; }
digest() { "$FLT" digest "$1" --batch 4 --workers 2 --order seq 2>/dev/null | awk '/^stream/ {print $2}'; }

# ---- JSONL and CSV into shards and LMDB: exact values through the loader --------------------
pack jsonl "$T/js" -q; rc=$?
[[ $rc -eq 0 ]] && pass "jsonl --no-image: exit 0" || fail "jsonl --no-image: exit $rc: $(head -c 300 "$T/js.err")"
dumped "$T/js" jsonl "jsonl -> shards"
printf 'meta.jsonl:6\tfield emb: has 3 values, the field holds 8\nmeta.jsonl:10\tfield cap: the key is missing\n' >"$T/want.report"
# the listing reports with the file as given: its folder too
sed "s|^meta|$D/meta|" "$T/want.report" >"$T/want.report.full"
cmp -s "$T/js.report" "$T/want.report.full" && pass "jsonl: --report names FILE:LINE and why of both bad rows" ||
    fail "jsonl report: $(cat "$T/js.report")"
has "$T/js.err" "skipping $D/meta.jsonl:6: field emb: has 3 values, the field holds 8" "jsonl: the bad row is named on stderr"
pack jsonl "$T/jl" -q --backend lmdb && dumped "$T/jl" jsonl "jsonl -> lmdb" || fail "jsonl -> lmdb: $(head -c 300 "$T/jl.err")"
pack csv "$T/cs" -q && dumped "$T/cs" csv "csv -> shards" || fail "csv -> shards: $(head -c 300 "$T/cs.err")"
grep -qF "meta.csv:11	has 6 fields but the header has 7" "$T/cs.report" && grep -qF "meta.csv:7	field emb: has 3 values" "$T/cs.report" &&
    pass "csv: --report names both bad rows" || fail "csv report: $(cat "$T/cs.report")"
pack csv "$T/cl" -q --backend lmdb && dumped "$T/cl" csv "csv -> lmdb" || fail "csv -> lmdb: $(head -c 300 "$T/cl.err")"
d_js=$(digest "$T/js")
[[ -n "$d_js" && "$d_js" == "$(digest "$T/jl")" && "$d_js" == "$(digest "$T/cs")" && "$d_js" == "$(digest "$T/cl")" ]] &&
    pass "jsonl / csv, shards / lmdb: the same batches (fastload digest)" || fail "digests differ: $d_js"

# the "path" key of rows 1, 4, ... (8 rows, one of them skipped) is not read: one warning
pack jsonl "$T/jw"
has "$T/jw.err" "warning: --no-image: 8 rows have a 'path' key, which is not read" "a path key is named as not read"
has "$T/jw.err" "(no image, fields only)" "the summary says no image"

# ---- info, verify, extract ------------------------------------------------------------------
"$P" info "$T/js" >"$T/info" 2>&1
has "$T/info" "encoding:    none" "info: encoding none"
has "$T/info" "schema:      no image: each record is its fields" "info: says no image"
has "$T/info" "records:     22" "info: 22 records (24 rows, 2 skipped)"
for f in "emb            float_vector float32   [8]" "arr            ndarray      float32   [2,3]" \
         "cap            text         uint8" "label          int          int32     (the label"; do
    has "$T/info" "$f" "info lists '${f%% *}'"
done
grep -q "image" <(grep -A9 "^fields:" "$T/info" | grep -v "no image") && fail "info lists an image field" || pass "info: no image field"
"$P" info "$T/jl" --json | "$PY" -c "import json,sys; j=json.load(sys.stdin); sys.exit(not (j['encoding']=='none' and j['height']==0 and [f['name'] for f in j['fields']]==['label','emb','arr','m','ids','cap','score']))" &&
    pass "info --json (lmdb): encoding none, the fields" || fail "info --json"
for ds in js jl cs; do
    "$P" verify "$T/$ds" --decode 2>"$T/verify.err"; rc=$?
    [[ $rc -eq 0 ]] && grep -qF "22 records checked and decoded, 0 bad" "$T/verify.err" && pass "verify --decode $ds: 22 records, 0 bad" ||
        fail "verify $ds: exit $rc: $(cat "$T/verify.err")"
done
mkdir -p "$T/ex" && (cd "$T/ex" && "$P" extract "$T/js" 2 2>"$T/ex.err"); rc=$?
[[ $rc -eq 0 ]] && "$PY" "$HERE/tensor_only.py" extract "$D" "$T/ex" "meta.jsonl:3" 2 >"$T/chk" 2>&1 &&
    pass "extract: meta.jsonl:3.json / .arr.npy / .m.npy / .cap.txt equal row 2, no image file" ||
    fail "extract: exit $rc: $(head -c 400 "$T/ex.err" "$T/chk")"
has "$T/ex.err" "record 2 (no image, source meta.jsonl:3)" "extract says no image"

# ---- kill + --resume, --part: the same batches as one pack ----------------------------------
(PACKDATA_TEST_KILL_AFTER=9 pack jsonl "$T/rs" -q --shard-size 4K) 2>/dev/null; rc=$? # no "Killed" line
[[ $rc -eq 137 && -d "$T/rs.partial" ]] && pass "killed after 9 records" || fail "kill: exit $rc"
pack jsonl "$T/rs" -q --shard-size 4K --resume; rc=$?
[[ $rc -eq 0 && "$(digest "$T/rs")" == "$d_js" ]] && dumped "$T/rs" jsonl "kill + --resume (shards)" || fail "--resume: exit $rc: $(head -c 300 "$T/rs.err")"
cmp -s "$T/rs.report" "$T/want.report.full" && pass "--resume: the report still names both bad rows" || fail "--resume report: $(cat "$T/rs.report")"
pack jsonl "$T/rs" -q --shard-size 4K --resume; rc=$?
[[ $rc -eq 0 ]] && pass "--resume on the finished set: exit 0" || fail "--resume again: exit $rc"
# an edited row is another job
cp "$D/meta.jsonl" "$T/meta.keep"
(PACKDATA_TEST_KILL_AFTER=4 pack jsonl "$T/re" -q --shard-size 4K) 2>/dev/null
sed -i '14s/"score": [-0-9.e]*/"score": 99.5/' "$D/meta.jsonl"
pack jsonl "$T/re" -q --shard-size 4K --resume; rc=$?
[[ $rc -eq 2 ]] && grep -qF "meta.jsonl:14 has other field values" "$T/re.err" && pass "--resume refuses an edited row (names its line)" ||
    fail "--resume after an edit: exit $rc: $(head -c 300 "$T/re.err")"
cp "$T/meta.keep" "$D/meta.jsonl"
mkdir -p "$T/parts"
pack jsonl "$T/parts/p0" -q --part 0/2 && pack jsonl "$T/parts/p1" -q --part 1/2 || fail "--part: $(head -c 300 "$T/parts/p0.err" "$T/parts/p1.err")"
rm -f "$T"/parts/*.report "$T"/parts/*.err
[[ "$(digest "$T/parts")" == "$d_js" ]] && dumped "$T/parts" jsonl "--part 0/2 + 1/2 read as one" || fail "--part: digest differs"
(PACKDATA_TEST_KILL_AFTER=5 pack csv "$T/rl" -q --backend lmdb) 2>/dev/null; pack csv "$T/rl" -q --backend lmdb --resume; rc=$?
[[ $rc -eq 0 && "$(digest "$T/rl")" == "$d_js" ]] && pass "kill + --resume (lmdb, csv)" || fail "lmdb --resume: exit $rc: $(head -c 300 "$T/rl.err")"

# ---- without --no-image: the error names the option; usage errors ----------------------------
"$P" pack --jsonl "$D/meta.jsonl" "$T/no" "${FIELDS[@]}" -q 2>"$T/err"; rc=$?
[[ $rc -eq 1 && ! -e "$T/no" ]] && grep -qF "meta.jsonl:1: has no image path (key \"path\"); rows of fields only (embeddings, features, tabular values) pack with --no-image" "$T/err" &&
    pass "jsonl without --no-image: exit 1, the hint names --no-image" || fail "jsonl without --no-image: exit $rc: $(head -c 300 "$T/err")"
"$P" pack --csv "$D/meta.csv" "$T/no" "${FIELDS[@]}" -q 2>"$T/err"; rc=$?
[[ $rc -eq 2 ]] && grep -qF "header has no column named 'path'" "$T/err" && grep -qF "pack with --no-image" "$T/err" &&
    pass "csv without --no-image: exit 2, the hint names --no-image" || fail "csv without --no-image: exit $rc: $(head -c 300 "$T/err")"
usage() {
    local what="$1" want="$2"; shift 2
    "$P" pack "$@" "$T/u" -q 2>"$T/err"; local rc=$?
    [[ $rc -eq 2 && ! -e "$T/u" ]] && grep -qF -- "$want" "$T/err" && pass "$what" || fail "$what: exit $rc: $(head -c 300 "$T/err")"
}
# a declared int that would be the label (no label column) needs its column like any field
printf 'a,b\n1,2\n' >"$T/ab.csv"
usage "csv: the label-to-be column missing" "header has no column named 'c'" --csv "$T/ab.csv" --no-image --field c:int
usage "--no-image without --field" "--no-image needs --field" --jsonl "$D/meta.jsonl" --no-image
usage "--no-image with boxes" "--no-image records have no image" --jsonl "$D/meta.jsonl" --no-image --field b:boxes
usage "--no-image with a mask" "--no-image records have no image" --csv "$D/meta.csv" --no-image --field k:mask
usage "--no-image on a folder" "--no-image goes with a CSV or JSON Lines source" "$FX/png" --no-image
usage "--no-image with --wds" "--no-image goes with a CSV or JSON Lines source" --wds "$FX/x.tar" --no-image --field a:int

# the first int --field is the label when there is no label column: the labels' range applies (a
# value of 2^30 once made packdata allocate 2^30 class names: found by fuzz_sources)
printf '{"n": 1073741824, "e": [1.0]}\n{"n": 2, "e": [2.0]}\n' >"$T/big.jsonl"
"$P" pack --jsonl "$T/big.jsonl" "$T/big" --no-image --field n:int --field e:float_vector:1 -q 2>"$T/err"; rc=$?
[[ $rc -eq 1 && ! -e "$T/big" ]] && grep -qF "big.jsonl:1: field n: label 1073741824 is out of range (0..999999 without --num-classes)" "$T/err" &&
    pass "jsonl: an int --field label out of range: exit 1, named" || fail "jsonl label out of range: exit $rc: $(head -c 300 "$T/err")"
printf 'n,e\n-3,1\n1,2\n' >"$T/neg.csv"
"$P" pack --csv "$T/neg.csv" "$T/neg" --no-image --field n:int --field e:float_vector:1 --on-error skip -q 2>"$T/err"; rc=$?
[[ $rc -eq 0 ]] && grep -qF "neg.csv:2: field n: label -3 is out of range" "$T/err" && [[ "$("$P" info "$T/neg" --json | grep -o '"records": *[0-9]*' | grep -o '[0-9]*$' | head -n 1)" == 1 ]] &&
    pass "csv: a negative int --field label skipped with --on-error skip, named" || fail "csv negative label: exit $rc: $(head -c 300 "$T/err")"
"$P" pack --csv "$T/neg.csv" "$T/neg2" --no-image --field n:int --field e:float_vector:1 --num-classes 2 -q 2>"$T/err"; rc=$?
[[ $rc -eq 1 ]] && grep -qF "label -3 is out of range (2 classes: 0..1)" "$T/err" &&
    pass "csv: --num-classes bounds an int --field label" || fail "csv --num-classes label: exit $rc: $(head -c 300 "$T/err")"
finish
