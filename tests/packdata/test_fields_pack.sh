#!/bin/bash
# test_fields_pack.sh — packdata packs sources with fields end to end and gives every field back:
# COCO instances (with and without --masks, shards and LMDB, kept / raw+zstd / resized JPEG),
# VOC palette mask pairs, Cityscapes suffix pairs, CSV and JSON Lines with every --field type.
# Each record is extracted (`packdata extract -o PREFIX`) and compared with the sources read the
# plain way (fields_check.py: json + PIL + numpy, coco_ref.py for COCO): same image bytes, exact
# boxes, labels, iscrowd, every mask pixel, every value. info --json lists the fields, verify
# (and --decode) passes. Bad inputs found while packing (a missing image, a mask of another size,
# an ndarray of another shape or dtype, a missing key, a box outside, an unknown category): exit 1,
# the record named, nothing at DST; --on-error skip --report lists them and packs the rest. A
# killed COCO pack finished with --resume equals an uninterrupted one (shards, extracts, fastload
# digest); edited annotations make --resume refuse.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
HERE="$(cd "$(dirname "$0")" && pwd)"
"$PY" -c "import numpy, PIL, skimage" 2>/dev/null || { echo "SKIP: /usr/bin/python3 lacks numpy/PIL/skimage"; exit 77; }
G="$T/gen"
"$PY" "$HERE/gen_fields_data.py" "$G" || { echo "FAIL: gen_fields_data.py"; exit 1; }
C="$G/coco"
CHK="$HERE/fields_check.py"

# extract every record of DST into EXDIR as r<i>.*; prints the record count
extract_all() {
    local dst="$1" ex="$2" n
    rm -rf "$ex"
    mkdir -p "$ex"
    n=$("$P" info "$dst" --json | "$PY" -c "import json,sys; print(json.load(sys.stdin)['records'])")
    for ((i = 0; i < n; i++)); do
        "$P" extract "$dst" "$i" -o "$ex/r$i" 2>>"$T/extract.log" || { echo "extract $dst $i failed" >&2; return 1; }
    done
    echo "$n"
}

# pack + verify + verify --decode + extract + compare: WHAT DST CHECK-ARGS -- PACK-ARGS
roundtrip() {
    local what="$1" dst="$2" mode="$3"; shift 3
    local -a chk=()
    while [[ "$1" != "--" ]]; do chk+=("$1"); shift; done
    shift
    rm -rf "$dst"
    if ! "$P" pack "$@" "$dst" -q 2>"$T/err"; then
        fail "$what: pack failed: $(head -c 400 "$T/err")"
        return
    fi
    "$P" verify "$dst" -q 2>"$T/err" || { fail "$what: verify: $(head -c 300 "$T/err")"; return; }
    "$P" verify "$dst" --decode -q 2>"$T/err" || { fail "$what: verify --decode: $(head -c 300 "$T/err")"; return; }
    local n
    n=$(extract_all "$dst" "$T/ex") || { fail "$what: extract"; return; }
    local a b=""
    case "$mode" in
        coco) a=("${chk[@]:0:2}" "$T/ex" "$n" "${chk[@]:2}") ;;
        pairs) a=("${chk[@]:0:2}" "$T/ex" "$n" "${chk[@]:2}") ;;
        table) a=("${chk[0]}" "$T/ex" "$n") ;;
    esac
    if "$PY" "$CHK" "$mode" "${a[@]}" >"$T/chk" 2>&1; then
        pass "$what ($n records, every field equal)"
    else
        fail "$what: $(head -c 800 "$T/chk")"
    fi
}

roundtrip "coco --masks" "$T/coco_m" coco "$C/instances.json" "$C/images" --masks -- \
    --coco "$C/instances.json" --root "$C/images" --masks
roundtrip "coco without --masks" "$T/coco" coco "$C/instances.json" "$C/images" -- \
    --coco "$C/instances.json" --root "$C/images"
roundtrip "coco --masks --backend lmdb" "$T/coco_l" coco "$C/instances.json" "$C/images" --masks -- \
    --coco "$C/instances.json" --root "$C/images" --masks --backend lmdb
"$PY" - "$C/instances.json" "$T/c300.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))  # 304 categories: the mask is uint16 (16-bit PNG)
d["categories"] += [{"id": 1000 + k, "name": f"extra{k}"} for k in range(300)]
json.dump(d, open(sys.argv[2], "w"))
EOF
roundtrip "coco --masks, 304 categories (uint16 mask), zstd" "$T/coco_16" coco "$T/c300.json" "$C/images" --masks -- \
    --coco "$T/c300.json" --root "$C/images" --masks --compress zstd
roundtrip "voc palette mask pairs" "$T/voc" pairs "$G/voc/JPEGImages" "$G/voc/SegmentationClass" .jpg .png -- \
    "$G/voc/JPEGImages" --mask-dir "$G/voc/SegmentationClass"
roundtrip "cityscapes suffix pairs" "$T/city" pairs "$G/city/leftImg8bit" "$G/city/gtFine" _leftImg8bit.png _gtFine_labelIds.png -- \
    "$G/city/leftImg8bit" --mask-dir "$G/city/gtFine" --image-suffix _leftImg8bit.png --mask-suffix _gtFine_labelIds.png
FIELDS=(--field score:float --field tags:int_list --field emb:float_vector:3 --field boxes:boxes
        --field arr:ndarray:float32:3x4 --field blob:bytes --field caption:text --field mask:mask --field count:int)
roundtrip "jsonl, every --field type" "$T/jl" table "$G/tab/fields.jsonl" -- \
    --jsonl "$G/tab/fields.jsonl" "${FIELDS[@]}" --field arrj:ndarray:float32:3x4
roundtrip "csv, every --field type" "$T/csv" table "$G/tab/fields.jsonl" -- \
    --csv "$G/tab/fields.csv" "${FIELDS[@]}"

# info --json: the fields with type, dtype, max_count, of, codec; format version 3
"$P" info "$T/coco_m" --json >"$T/info.json" 2>"$T/err"
if "$PY" - "$T/info.json" <<'EOF'; then pass "info --json lists the COCO fields"; else fail "info --json: $(head -c 600 "$T/info.json")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
f = {x["name"]: x for x in d["fields"]}
assert d["format_version"] == 3, d["format_version"]
assert [x["name"] for x in d["fields"]] == ["image", "boxes", "labels", "iscrowd", "mask"], d["fields"]
assert f["boxes"]["type"] == "boxes" and f["boxes"]["dtype"] == "float32" and f["boxes"]["max_count"] == 4
assert f["labels"] == {"name": "labels", "type": "int_list", "dtype": "int32", "max_count": 4, "of": "boxes"}, f["labels"]
assert f["mask"] == {"name": "mask", "type": "mask", "dtype": "uint8", "of": "image", "codec": "zstd"}, f["mask"]
assert d["classes"] == ["person", "rocket", "cup", "cat"], d["classes"]  # categories in id order
EOF
"$P" info "$T/jl" >"$T/info.txt"
grep -q "arr *ndarray *float32 *\[3,4\]" "$T/info.txt" && grep -q "caption *text" "$T/info.txt" \
    && pass "info lists ndarray shape and text fields" || fail "info text: $(cat "$T/info.txt")"

# resized JPEG and raw+zstd: boxes scale with the image (exactly), masks follow by nearest neighbour
rm -rf "$T/cj" "$T/cr"
"$P" pack --coco "$C/instances.json" --root "$C/images" --masks --encode jpeg --max-side 64 "$T/cj" -q &&
"$P" pack --coco "$C/instances.json" --root "$C/images" --masks --encode raw --resize 96x80 "$T/cr" -q &&
"$P" verify "$T/cr" --decode -q && n=$(extract_all "$T/cj" "$T/exj") && extract_all "$T/cr" "$T/exr" >/dev/null \
    || fail "resized packs"
"$PY" - "$HERE" "$C/instances.json" "$C/images" "$T/exj" "$T/exr" "${n:-0}" >"$T/chk" 2>&1 <<'EOF'
import json, sys
import numpy as np
from PIL import Image
sys.path.insert(0, sys.argv[1])
from coco_ref import read_coco
ref = {r["file"]: r for r in read_coco(sys.argv[2], sys.argv[3])[0]}
bad = 0
for ex, kind in ((sys.argv[4], "jpeg"), (sys.argv[5], "raw")):
    for i in range(int(sys.argv[6])):
        j = json.load(open(f"{ex}/r{i}.json"))
        r = ref[j["name"]]
        sh, sw = r["image"].shape[:2]
        h, w = j["height"], j["width"]
        if kind == "raw":
            assert (w, h) == (96, 80), (w, h)
        else:
            assert max(w, h) == min(64, max(sw, sh)), (w, h, sw, sh)
        sx, sy = np.float64(w) / sw, np.float64(h) / sh
        want = (r["boxes"].astype(np.float64) * [sx, sy, sx, sy]).astype(np.float32)
        got = np.array(j["boxes"], np.float32).reshape(-1, 4)
        if not np.allclose(got, want, atol=1e-4):
            print(kind, j["name"], "boxes", got.tolist(), want.tolist()); bad += 1
        m = np.asarray(Image.open(f"{ex}/{j['mask']}"))
        ys = ((np.arange(h) + 0.5) * sh / h).astype(int)
        xs = ((np.arange(w) + 0.5) * sw / w).astype(int)
        if not np.array_equal(m, r["mask"][ys][:, xs]):
            print(kind, j["name"], "mask differs"); bad += 1
sys.exit(1 if bad else 0)
EOF
[[ $? -eq 0 ]] && pass "resized (jpeg --max-side 64, raw --resize 96x80): boxes scaled, masks nearest neighbour" \
    || fail "resized records: $(head -c 600 "$T/chk")"

# the COCO file read member by member: its members in another order (and escapes, an "info"
# object, nested lists) give the same shards; damaged JSON is refused naming the file and byte
"$PY" - "$C/instances.json" "$T/reord.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
e = {"annotations": d["annotations"], "info": {"x": [[1, [2, {"y": "\u00e9\"}"}]], -0.5e-3, True, None]},
     "categories": d["categories"], "images": d["images"]}
json.dump(e, open(sys.argv[2], "w"), indent=1, ensure_ascii=True)
EOF
rm -rf "$T/reord"
"$P" pack --coco "$T/reord.json" --root "$C/images" --masks "$T/reord" -q 2>"$T/err"
same=1
for f in "$T"/coco_m/shard-*; do cmp -s "$f" "$T/reord/$(basename "$f")" || same=0; done
[[ $same -eq 1 && -d "$T/reord" ]] && pass "COCO members in another order: same shards" \
    || fail "reordered COCO file: $(head -c 300 "$T/err")"
jbad=0
sz=$(stat -c %s "$C/instances.json")
for cut in 0 1 7 100 1000 $((sz / 3)) $((sz / 2)) $((sz - 2)) $((sz - 1)); do
    head -c "$cut" "$C/instances.json" >"$T/cut.json"
    rm -rf "$T/cut_out"
    "$P" pack --coco "$T/cut.json" --root "$C/images" --masks "$T/cut_out" -q 2>"$T/err"
    rc=$?
    if [[ $rc -ne 1 || -e "$T/cut_out" ]] || ! grep -q "cut.json" "$T/err"; then
        jbad=1
        fail "COCO file cut at byte $cut: exit $rc: $(head -c 300 "$T/err")"
    fi
done
for bad_text in '{"images": [], "categories": [1,]}' '{"images": [] "categories": []}' \
    '{"images": [{"id": 1, "file_name": "a\x"}], "categories": []}' '{"images": [], "categories": [], }' \
    '[{"images": []}]' '{"images": [], "categories": [{"id": 1, "name": "a"}]} x' "{\"a\": \"$(printf '\t')\"}"; do
    printf '%s' "$bad_text" >"$T/cut.json"
    rm -rf "$T/cut_out"
    "$P" pack --coco "$T/cut.json" --root "$C/images" "$T/cut_out" -q 2>"$T/err"
    rc=$?
    if [[ $rc -ne 1 || -e "$T/cut_out" ]] || ! grep -q "cut.json" "$T/err"; then
        jbad=1
        fail "COCO text $bad_text: exit $rc: $(head -c 300 "$T/err")"
    fi
done
[[ $jbad -eq 0 ]] && pass "damaged COCO JSON (9 cuts, 7 syntax errors): exit 1 naming the file, nothing written"

# ---- bad inputs found while packing ---------------------------------------------------------
# A bad input: exit 1, stderr holds every wanted text, no DST and no DST.partial left behind.
bad() {
    local what="$1" dst="$T/bad_out"; shift
    local -a want=()
    while [[ "$1" != "--" ]]; do want+=("$1"); shift; done
    shift
    rm -rf "$dst" "$dst.partial"
    "$P" pack "$@" "$dst" -q 2>"$T/err"
    local rc=$?
    local ok=1
    [[ $rc -eq 1 ]] || { fail "$what: exit $rc, want 1 ($(head -c 300 "$T/err"))"; ok=0; }
    for w in "${want[@]}"; do
        grep -qF -- "$w" "$T/err" || { fail "$what: message lacks '$w': $(head -c 400 "$T/err")"; ok=0; }
    done
    [[ -e "$dst" || -e "$dst.partial" ]] && { fail "$what: left $dst behind"; ok=0; }
    [[ $ok -eq 1 ]] && pass "$what"
}
# COCO: one image's file gone; a box outside; an unknown category (copies of the good set)
BC="$T/badcoco"
mkdir -p "$BC/images"
cp "$C"/images/*.jpg "$BC/images/"
rm "$BC/images/coffee.jpg"
bad "coco: missing image file" "coffee.jpg" "missing file" -- --coco "$C/instances.json" --root "$BC/images" --masks
"$PY" - "$C/instances.json" "$BC" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
a = sorted(d["annotations"], key=lambda a: a["id"])
e = json.loads(json.dumps(d)); [x for x in e["annotations"] if x["id"] == a[1]["id"]][0]["bbox"] = [10, 10, 500, 5]
json.dump(e, open(sys.argv[2] + "/box_out.json", "w"))
e = json.loads(json.dumps(d)); [x for x in e["annotations"] if x["id"] == a[2]["id"]][0]["category_id"] = 3
json.dump(e, open(sys.argv[2] + "/no_cat.json", "w"))
print(a[1]["id"], a[2]["id"], file=open(sys.argv[2] + "/ids", "w"))
EOF
read -r AID1 AID2 <"$BC/ids"
bad "coco: box outside the image" "annotation id $AID1" "lies outside" -- --coco "$BC/box_out.json" --root "$C/images"
bad "coco: unknown category" "annotation id $AID2" "category_id 3 is not in" -- --coco "$BC/no_cat.json" --root "$C/images"
# mask pairs: a mask of another size than its image
V="$T/badvoc"
cp -r "$G/voc" "$V"
"$PY" -c "
from PIL import Image; p = '$V/SegmentationClass/2007_000001.png'
m = Image.open(p); m.resize((m.width - 3, m.height)).save(p)"
bad "mask pairs: mask of another size" "2007_000001" "mask is 117x80, its image is 120x80" -- "$V/JPEGImages" --mask-dir "$V/SegmentationClass"
# JSONL: an ndarray file of another shape, of another dtype; a missing key
J="$G/tab/fields.jsonl"
bad "jsonl: ndarray of another shape" "astronaut" "field arr" "(3,4)" "(4,3)" -- --jsonl "$J" --field arr:ndarray:float32:4x3
bad "jsonl: ndarray of another dtype" "astronaut" "field arr" "float32" "int32" -- --jsonl "$J" --field arr:ndarray:int32:3x4
bad "jsonl: missing key" "fields.jsonl:1" "field nothere" -- --jsonl "$J" --field nothere:int

# --on-error skip --report: the bad inputs listed (source, reason), the others packed
cp "$C/instances.json" "$BC/instances.json"
"$PY" - "$BC/instances.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
a = sorted(d["annotations"], key=lambda a: a["id"])
a[2]["category_id"] = 3  # an unknown category: its image is skipped
json.dump(d, open(sys.argv[1], "w"))
EOF
rm -rf "$T/skip"
"$P" pack --coco "$BC/instances.json" --root "$BC/images" --masks --on-error skip --report "$T/report.tsv" "$T/skip" -q 2>"$T/err"
rc=$?
recs=$("$P" info "$T/skip" --json 2>/dev/null | "$PY" -c "import json,sys; print(json.load(sys.stdin)['records'])")
if [[ $rc -eq 0 && "$recs" == 3 ]] && grep -q "coffee.jpg.*missing file" "$T/report.tsv" \
    && grep -q "annotation id $AID2.*category_id 3" "$T/report.tsv" && [[ $(wc -l <"$T/report.tsv") -eq 2 ]]; then
    pass "--on-error skip --report: 2 bad inputs listed, 3 records packed"
else
    fail "--on-error skip: exit $rc, $recs records, report: $(cat "$T/report.tsv" 2>/dev/null) err: $(head -c 300 "$T/err")"
fi

# ---- --resume of a killed COCO pack ---------------------------------------------------------
CO=(--coco "$C/instances.json" --root "$C/images" --masks --shard-size 8K)
rm -rf "$T/full" "$T/res" "$T/res.partial"
"$P" pack "${CO[@]}" "$T/full" -q || fail "uninterrupted pack"
(PACKDATA_TEST_KILL_AFTER=3 "$P" pack "${CO[@]}" "$T/res" -q) 2>/dev/null
if [[ -d "$T/res.partial" && ! -e "$T/res" ]]; then
    "$P" pack "${CO[@]}" "$T/res" -q --resume 2>"$T/err" || fail "--resume: $(head -c 300 "$T/err")"
    same=1
    for f in "$T"/full/shard-*; do cmp -s "$f" "$T/res/$(basename "$f")" || same=0; done
    [[ $(ls "$T/full" | grep -c shard-) -eq $(ls "$T/res" | grep -c shard-) ]] || same=0
    extract_all "$T/full" "$T/exf" >/dev/null && extract_all "$T/res" "$T/exres" >/dev/null || same=0
    diff -r "$T/exf" "$T/exres" >/dev/null || same=0
    [[ $same -eq 1 ]] && pass "killed COCO pack + --resume = uninterrupted (shards byte for byte, every field)" \
        || fail "resumed COCO pack differs from the uninterrupted one"
    # and as the loader delivers them (fastload digest hashes every field, counts included)
    FLT="$B/tools/fastload/fastload"
    if [[ -x "$FLT" ]]; then
        d1=$("$FLT" digest "$T/full" --size 48 --batch 2 --augment rrc,flip --workers 2 2>/dev/null | tail -1)
        d2=$("$FLT" digest "$T/res" --size 48 --batch 2 --augment rrc,flip --workers 2 2>/dev/null | tail -1)
        [[ -n "$d1" && "$d1" == "$d2" && "$d1" == stream* ]] && pass "fastload digest (rrc + flip) of the resumed pack = uninterrupted" \
            || fail "fastload digest: '$d1' vs '$d2'"
    fi
else
    fail "the kill after 3 records left no partial dataset"
fi
# annotations edited between the kill and --resume: another job
rm -rf "$T/res" "$T/res.partial"
cp "$C/instances.json" "$BC/ed.json"
(PACKDATA_TEST_KILL_AFTER=2 "$P" pack --coco "$BC/ed.json" --root "$C/images" "$T/res" -q --shard-size 8K) 2>/dev/null
"$PY" - "$BC/ed.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["annotations"][-1]["bbox"][0] += 1  # one box moved by a pixel
json.dump(d, open(sys.argv[1], "w"))
EOF
"$P" pack --coco "$BC/ed.json" --root "$C/images" "$T/res" -q --shard-size 8K --resume 2>"$T/err"
rc=$?
[[ $rc -ne 0 ]] && grep -q "cannot resume" "$T/err" && grep -q "has other field values" "$T/err" \
    && pass "--resume after an annotation changed: refused, naming the image" \
    || fail "--resume with edited annotations: exit $rc: $(head -c 400 "$T/err")"

finish
