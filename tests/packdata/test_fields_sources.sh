#!/bin/bash
# test_fields_sources.sh — packdata's sources with fields beyond image + label: COCO instances
# (boxes, labels, iscrowd, masks from polygons and RLE), image/mask folder pairs (VOC palette
# masks, Cityscapes suffixes), CSV / JSON Lines with --field of every type. Inputs are objects
# drawn on real photographs (gen_fields_data.py). Bad inputs: exit 1, a message naming the
# annotation / line and field, nothing at DST; usage errors exit 2.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
HERE="$(cd "$(dirname "$0")" && pwd)"
"$PY" -c "import numpy, PIL, skimage" 2>/dev/null || { echo "SKIP: /usr/bin/python3 lacks numpy/PIL/skimage"; exit 77; }
G="$T/gen"
"$PY" "$HERE/gen_fields_data.py" "$G" || { echo "FAIL: gen_fields_data.py"; exit 1; }
C="$G/coco"

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

# COCO files with one defect each (a copy of the good one, edited in Python)
mutate() { # NAME PYTHON-STATEMENTS (on d, the parsed JSON)
    "$PY" - "$C/instances.json" "$T/$1.json" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
a = sorted(d["annotations"], key=lambda a: a["id"])[0]
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
EOF
}
mutate box_out 'a["bbox"] = [-3, 2, 10, 10]'
mutate neg_w 'a["bbox"][2] = -1'
mutate no_cat 'a["category_id"] = 99'
mutate dup_img 'd["images"].append(dict(d["images"][0]))'
mutate no_img 'a["image_id"] = 424242'
mutate bad_rle 'a["segmentation"] = {"size": [a and [i for i in d["images"] if i["id"] == a["image_id"]][0]["height"], [i for i in d["images"] if i["id"] == a["image_id"]][0]["width"]], "counts": "0"}'
mutate odd_poly 'a["segmentation"] = [[1, 2, 3]]'
mutate no_cats 'd["categories"] = []'
AID=$("$PY" -c "import json; print(min(a['id'] for a in json.load(open('$C/instances.json'))['annotations']))")
bad "coco: box outside the image" "annotation id $AID" "lies outside the" -- --coco "$T/box_out.json" --root "$C/images"
bad "coco: negative width" "annotation id $AID" "negative width or height" -- --coco "$T/neg_w.json" --root "$C/images"
bad "coco: unknown category" "annotation id $AID" "category_id 99 is not in" -- --coco "$T/no_cat.json" --root "$C/images"
bad "coco: duplicate image id" "appears twice in \"images\"" -- --coco "$T/dup_img.json" --root "$C/images"
bad "coco: annotation of no image" "annotation id $AID" "image_id is not the id" -- --coco "$T/no_img.json" --root "$C/images"
bad "coco: bad RLE string (--masks)" "annotation id $AID" "RLE" -- --coco "$T/bad_rle.json" --root "$C/images" --masks
bad "coco: odd polygon (--masks)" "annotation id $AID" "polygon 0" -- --coco "$T/odd_poly.json" --root "$C/images" --masks
bad "coco: no categories" "\"categories\" is empty" -- --coco "$T/no_cats.json" --root "$C/images"

# usage errors: exit 2
usage() {
    local what="$1"; shift
    "$P" pack "$@" "$T/u_out" -q 2>"$T/err"
    local rc=$?
    if [[ $rc -eq 2 && ! -e "$T/u_out" ]]; then pass "$what"; else fail "$what: exit $rc: $(head -c 300 "$T/err")"; fi
}
usage "--masks without --coco" "$G/voc/JPEGImages" --masks
usage "--coco without --root" --coco "$C/instances.json"
usage "--field with an unknown type" --jsonl "$G/tab/fields.jsonl" --field x:complex
usage "--field float_vector without a length" --jsonl "$G/tab/fields.jsonl" --field emb:float_vector
# a field named as a variable field's counts (the loaders' batches hold them as NAME_count):
# the Python batch mapping refused such a set at its first batch; now packdata refuses it
sed 's/}$/, "tags_count": 1}/' "$G/tab/fields.jsonl" >"$G/tab/counts.jsonl"
usage "--field tags_count beside the int_list tags" --jsonl "$G/tab/counts.jsonl" --field tags:int_list --field tags_count:int
grep -q 'field "tags_count" is the name the loaders give field "tags"' "$T/err" ||
    fail "tags_count: the error does not say why: $(head -c 300 "$T/err")"

# CSV / JSONL: a value that does not fit its field names the line and the field
J="$G/tab/fields.jsonl"
bad "jsonl: float_vector of another length" "fields.jsonl:1" "field emb" "has 3 values, the field holds 4" -- --jsonl "$J" --field emb:float_vector:4
bad "jsonl: missing key" "fields.jsonl:1" "field nothere" "missing" -- --jsonl "$J" --field nothere:int_list
bad "jsonl: ndarray nested list of another shape" "fields.jsonl:1" "field arrj" "more values than its shape holds" -- --jsonl "$J" --field arrj:ndarray:float32:2x3
bad "jsonl: box that is not 4 numbers" "field tags" -- --jsonl "$J" --field tags:boxes
bad "jsonl: int_list of=boxes with another count than the boxes" "fields.jsonl:1" "field tags has 1 value but field boxes (its of=) has 0 boxes" -- --jsonl "$J" --field boxes:boxes --field tags:int_list:of=boxes
usage "int_list of= naming no boxes field given before it" --jsonl "$J" --field tags:int_list:of=boxes --field boxes:boxes
bad "csv: int_list of non-numbers" "fields.csv:2" "field caption" -- --csv "$G/tab/fields.csv" --field caption:int_list

finish
