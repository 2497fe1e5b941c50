#!/usr/bin/env bash
# test_predict.sh MODE — `trainfast predict` as a user runs it.
#   outputs: on a packed labelled set, predict's top-1/top-5 equal `trainfast eval --no-tta`'s
#            (the run kept an EMA, which both use), the argmax of the .npy logits gives the same
#            top-1; the .npy parses with numpy (1.0 header, '<f4', C order, [N, classes]); JSON
#            lines, CSV and text agree with the logits (classes, softmax probabilities, --top);
#            a checkpoint directory means its newest valid checkpoint.
#   images:  image files (PNG gray/RGB, JPEG, other sizes) give bit-identical logits to the same
#            files packed: raw at the model's size for a model trained on fixed-size data, kept
#            as they are (the loader's centre crop) for a model trained at --size.
#   outputs-onednn: outputs on the oneDNN CPU path (skip 77 in a build without oneDNN); the other
#            modes run the reference layers (FASTLOAD_CPU_BACKEND=reference unless set), which
#            take seconds where oneDNN takes ~10x longer on these tiny layers.
#   errors:  missing/corrupt checkpoint, data of another shape/channels/classes (exit 2 naming
#            both), unreadable/not-an-image/truncated files (named), a directory among images,
#            unwritable --logits/--csv/stdout (exit 1, nothing left behind), bad options (exit 2).
# Needs /usr/bin/python3 with numpy and PIL (skip 77 without).
set -u
MODE=${1:?mode}
B="${FL_BINARY_DIR:?}"
TF="$B/trainer/trainfast"
PD="$B/tools/packdata/packdata"
MK="$B/tests/trainer/tf_make_dataset"
PY=/usr/bin/python3
T="$(mktemp -d "${TMPDIR:-/tmp}/tf_predict.XXXXXX")"
trap 'rm -rf "$T"' EXIT
# in a sanitizer build a leak or error report must not pass as an expected exit 1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:exitcode=86"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1:exitcode=86"
failed=0
fail() { echo "FAIL: $*"; failed=1; }
die() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/../lib/expect.sh"
if [[ $MODE == outputs-onednn ]]; then
    export FASTLOAD_CPU_BACKEND=onednn
else
    export FASTLOAD_CPU_BACKEND="${FASTLOAD_CPU_BACKEND:-reference}"
fi
"$PY" -c "import numpy, PIL" 2>/dev/null || { echo "SKIP: $PY lacks numpy or PIL"; exit 77; }
[[ -x "$PD" ]] || { echo "SKIP: packdata not built"; exit 77; }

CLASSES=class0,class1,class2,class3,class4,class5,class6,class7
# a model trained on fixed-size 16x16 gray data (8 classes), kept with an EMA, not too good
fixed_model() {
    "$MK" "$T/train" 2000 16 16 1 8 1 && "$MK" "$T/val" 300 16 16 1 8 2 || die "fixture"
    "$TF" train --data "$T/train" --val "$T/val" --width 4 --batch 50 --epochs 1 --lr 0.005 \
        --ema 0.9 --seed 7 --threads 2 --quiet --checkpoint "$T/ck" > /dev/null 2> "$T/train.err" || {
        grep -q "built without oneDNN" "$T/train.err" && { echo "SKIP: no oneDNN in this build"; exit 77; }
        cat "$T/train.err"
        die "training the fixture model"
    }
    CK=$(ls "$T"/ck/ckpt-*.tfc | sort | tail -n 1)
}

mode_outputs() {
    fixed_model
    "$TF" eval "$CK" "$T/val" --no-tta --json > "$T/eval.json" 2> /dev/null || die "eval"
    expect_status 0 "predict --json" -- "$TF" predict "$CK" "$T/val" --json --top 3 \
        --logits "$T/l.npy" --csv "$T/p.csv" --batch 64 || return
    cp "$T/out" "$T/pred.jsonl"
    "$TF" predict "$T/ck" "$T/val" --top 20 > "$T/pred.txt" 2> "$T/pred.err" || fail "text mode"
    grep -q "predicting with $CK (newest valid checkpoint)" "$T/pred.err" \
        || fail "directory: $(head -2 "$T/pred.err")"
    grep -q "images/s" "$T/pred.err" || fail "no images/s on stderr: $(cat "$T/pred.err")"
    "$PY" - "$T" <<'EOF' || fail "outputs (see above)"
import csv, json, sys
import numpy as np
t = sys.argv[1]
raw = open(f"{t}/l.npy", "rb").read()
assert raw[:8] == b"\x93NUMPY\x01\x00", raw[:8]
hlen = raw[8] | raw[9] << 8
assert (10 + hlen) % 64 == 0 and raw[10 + hlen - 1:10 + hlen] == b"\n", hlen
L = np.load(f"{t}/l.npy")
assert L.dtype == np.dtype("<f4") and L.shape == (300, 8) and L.flags["C_CONTIGUOUS"], (L.dtype, L.shape)
lines = [json.loads(s) for s in open(f"{t}/pred.jsonl")]
recs, summ = lines[:-1], lines[-1]
assert len(recs) == 300 and summ["summary"] is True and summ["images"] == 300, summ
ev = json.load(open(f"{t}/eval.json"))
labels = np.array([r["label"] for r in recs])
top1 = float(np.mean(L.argmax(1) == labels))
rank = np.array([(L[i] > L[i, y]).sum() + (L[i, :y] == L[i, y]).sum() for i, y in enumerate(labels)])
top5 = float(np.mean(rank < 5))
# eval prints %.6g of correct/n: the same numbers, the same text
assert "%.6g" % top1 == "%.6g" % ev["top1"] == "%.6g" % summ["top1"], (top1, ev["top1"], summ["top1"])
assert "%.6g" % top5 == "%.6g" % ev["top5"] == "%.6g" % summ["top5"], (top5, ev["top5"], summ["top5"])
assert 0.2 < top1 < 0.99, f"fixture model top-1 {top1}: the comparison means little"
P = np.exp(L.astype(np.float64) - L.max(1, keepdims=True))
P /= P.sum(1, keepdims=True)
names = [f"class{k}" for k in range(8)]
rows = list(csv.reader(open(f"{t}/p.csv")))
assert rows[0] == ["index", "label", "class_1", "prob_1", "class_2", "prob_2", "class_3", "prob_3"], rows[0]
for i, (r, c) in enumerate(zip(recs, rows[1:])):
    order = sorted(range(8), key=lambda k: (-L[i, k], k))[:3]
    assert r["index"] == i and r["label_name"] == names[r["label"]], r
    assert [e["class"] for e in r["top"]] == order, (i, r, order)
    assert all(e["name"] == names[e["class"]] for e in r["top"])
    assert all(abs(e["prob"] - P[i, e["class"]]) <= 1e-5 * max(P[i, e["class"]], 1e-3) for e in r["top"]), (r, P[i])
    assert c[0] == str(i) and c[1] == r["label_name"] and c[2::2] == [names[k] for k in order], c
    assert all(abs(float(p) - P[i, k]) <= 1e-5 * max(P[i, k], 1e-3) for p, k in zip(c[3::2], order)), c
text = open(f"{t}/pred.txt").read().splitlines()
assert len(text) == 301, len(text)
first = text[0].split(": ", 1)
assert first[0] == "0" and first[1].count("%") == 8 and "(label " in first[1], text[0]
assert text[-1].startswith(f"{ev['checkpoint']} on ") and "top1" in text[-1], text[-1]
print(f"ok   top-1 {top1:.4f} / top-5 {top5:.4f} from the .npy = eval --no-tta = predict's summary; "
      "JSON lines, CSV, text and --top 20 (clamped to 8) agree with the logits")
EOF
    [[ ! -e "$T/l.npy.tmp" && ! -e "$T/p.csv.tmp" ]] || fail "temporaries left behind"
}

# write images with PIL: name size mode format [seed]
make_images() {
    "$PY" - "$@" <<'EOF'
import sys
import numpy as np
from PIL import Image
d, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(int(sys.argv[3]))
kinds = [((16, 16), "L", "png"), ((16, 16), "RGB", "png"), ((31, 23), "RGB", "jpg"),
         ((20, 40), "L", "png"), ((17, 29), "RGB", "png"), ((48, 36), "L", "jpg")]
for i in range(n):
    (w, h), mode, fmt = kinds[i % len(kinds)]
    shape = (h, w) if mode == "L" else (h, w, 3)
    # smooth gradients plus noise: JPEG keeps them, resizing has something to do
    base = np.linspace(0, 255, w)[None, :] * (0.3 + 0.7 * rng.random()) + rng.normal(0, 40, (h, w))
    a = np.clip(base if mode == "L" else np.stack([base, base[::-1], base.T[:w, :h].T if h == w else base * 0.5], -1), 0, 255)
    Image.fromarray(a.astype(np.uint8), mode).save(f"{d}/img{i:03d}.{fmt}", quality=90)
    print(f"img{i:03d}.{fmt} {i % 8}")
EOF
}

compare_npy() {
    "$PY" -c "
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == b.shape == (int(sys.argv[3]), 8), (a.shape, b.shape)
sys.exit(0 if a.tobytes() == b.tobytes() else 1)" "$1" "$2" "$3"
}

mode_images() {
    fixed_model
    mkdir -p "$T/img"
    make_images "$T/img" 24 5 > "$T/img/list.txt" || die "making images"
    files=()
    while read -r f _; do files+=("$T/img/$f"); done < "$T/img/list.txt"
    # 1. fixed-size model: the same files packed as raw 16x16 gray records
    "$PD" pack "$T/img/list.txt" "$T/raw" --encode raw --gray --resize 16x16 --class-names "$CLASSES" \
        > /dev/null 2>&1 || die "packdata raw"
    # the same --batch on both sides: the CPU GEMM's summation order (and so the last bit of a
    # logit) may depend on how many samples a batch holds
    "$TF" predict "$CK" "$T/raw" --logits "$T/raw.npy" --batch 5 > /dev/null 2>&1 || fail "predict packed raw"
    expect_status 0 "predict image files" -- "$TF" predict "$CK" "${files[@]}" --logits "$T/files.npy" \
        --csv "$T/files.csv" --batch 5
    compare_npy "$T/raw.npy" "$T/files.npy" 24 \
        && echo "ok   fixed-size model: 24 image files (PNG/JPEG, gray/RGB, 4 sizes) = the same packed raw 16x16, bit for bit" \
        || fail "fixed-size model: image files' logits differ from the packed set's"
    grep -q "^$T/img/img000.png: class[0-7] [0-9.]*%$" "$T/out" || fail "per-file lines: $(head -2 "$T/out")"
    head -1 "$T/files.csv" | grep -qx "index,file,class_1,prob_1" || fail "CSV header $(head -1 "$T/files.csv")"
    sed -n 2p "$T/files.csv" | grep -q "^0,$T/img/img000.png,class" || fail "CSV row $(sed -n 2p "$T/files.csv")"
    # 2. a model trained at --size 16 on images of varying size: the loader's centre crop
    mkdir -p "$T/vtrain"
    make_images "$T/vtrain" 64 9 > "$T/vtrain/list.txt" || die "making training images"
    "$PD" pack "$T/vtrain/list.txt" "$T/vt" --class-names "$CLASSES" > /dev/null 2>&1 || die "packdata keep"
    "$PD" pack "$T/img/list.txt" "$T/keep" --class-names "$CLASSES" > /dev/null 2>&1 || die "packdata keep"
    "$TF" train --data "$T/vt" --val "$T/keep" --size 16 --width 4 --batch 16 --epochs 1 --seed 3 \
        --threads 2 --quiet --checkpoint "$T/vck" > /dev/null 2> "$T/vtrain.err" \
        || { cat "$T/vtrain.err"; die "training at --size 16"; }
    "$TF" predict "$T/vck" "$T/keep" --logits "$T/keep.npy" > /dev/null 2>&1 || fail "predict packed keep"
    "$TF" predict "$T/vck" "${files[@]}" --logits "$T/vfiles.npy" > /dev/null 2>&1 || fail "predict files (size model)"
    compare_npy "$T/keep.npy" "$T/vfiles.npy" 24 \
        && echo "ok   model trained at --size 16: the image files = the same files packed as they are (centre crop), bit for bit" \
        || fail "--size model: image files' logits differ from the packed set's"
}

mode_errors() {
    fixed_model
    printf 'x' > "$T/x"
    expect_status 1 "missing checkpoint" -- "$TF" predict "$T/none.tfc" "$T/val" && expect_err "none.tfc" "missing checkpoint"
    cp "$CK" "$T/bad.tfc"
    printf '\xff' | dd of="$T/bad.tfc" bs=1 seek=3000 conv=notrunc 2> /dev/null
    expect_status 1 "corrupt checkpoint" -- "$TF" predict "$T/bad.tfc" "$T/val" && expect_err "bad.tfc: checksum mismatch" "corrupt checkpoint"
    "$MK" "$T/v20" 50 20 20 1 8 3 && "$MK" "$T/vrgb" 50 16 16 3 8 3 && "$MK" "$T/v9" 50 16 16 1 9 3 \
        && "$MK" "$T/vnames" 50 16 16 1 8 3 a,b,c,d,e,f,g,h || die "fixtures"
    expect_status 2 "other image size" -- "$TF" predict "$CK" "$T/v20" \
        && expect_err "$T/v20 holds 20x20 images with 1 channel(s) but $CK (fastcnn) takes 16x16x1" "other size"
    expect_status 2 "other channels" -- "$TF" predict "$CK" "$T/vrgb" && expect_err "but $CK (fastcnn) takes 16x16x1" "other channels"
    expect_status 2 "more classes" -- "$TF" predict "$CK" "$T/v9" \
        && expect_err "label 8 is 'class8' in $T/v9, '(none: more classes)' in training" "more classes"
    expect_status 2 "other class names" -- "$TF" predict "$CK" "$T/vnames" \
        && expect_err "label 0 is 'a' in $T/vnames, 'class0' in training" "class names"
    "$PY" -c "
from PIL import Image; import numpy as np
Image.fromarray(np.zeros((16, 16), np.uint8)).save('$T/ok.png')
Image.fromarray(np.random.default_rng(1).integers(0, 255, (64, 64), dtype=np.uint8)).save('$T/big.png')" || die "png"
    head -c 2000 "$T/big.png" > "$T/short.png"
    echo "not an image" > "$T/text.png"
    expect_status 1 "missing image" -- "$TF" predict "$CK" "$T/ok.png" "$T/gone.jpg" && expect_err "$T/gone.jpg" "missing image"
    expect_status 1 "not an image" -- "$TF" predict "$CK" "$T/ok.png" "$T/text.png" && expect_err "$T/text.png: " "not an image"
    expect_status 1 "truncated image" -- "$TF" predict "$CK" "$T/short.png" && expect_err "$T/short.png: " "truncated"
    expect_status 2 "directory among images" -- "$TF" predict "$CK" "$T/ok.png" "$T/val" \
        && expect_err "$T/val is a directory" "directory among images"
    expect_status 1 "--logits in a missing directory" -- "$TF" predict "$CK" "$T/val" --logits "$T/no/l.npy" \
        && expect_err "--logits $T/no/l.npy: cannot create" "unwritable --logits"
    expect_status 1 "--csv in a missing directory" -- "$TF" predict "$CK" "$T/val" --csv "$T/no/p.csv" \
        && expect_err "--csv $T/no/p.csv: cannot create" "unwritable --csv"
    echo old > "$T/keep.npy"
    expect_status 1 "failing run" -- "$TF" predict "$CK" "$T/ok.png" "$T/text.png" --logits "$T/keep.npy"
    [[ $(cat "$T/keep.npy") == old && ! -e "$T/keep.npy.tmp" ]] || fail "a failed run replaced --logits or left its .tmp"
    if [[ -w /dev/full ]]; then
        expect_status 1 "stdout full" -- sh -c "'$TF' predict '$CK' '$T/val' > /dev/full" \
            && expect_err "cannot write the predictions to stdout" "stdout full"
    fi
    for bad in "--top 0" "--top x" "--batch 0" "--device tpu" "--threads 0" "--workers 0" "--logits" "--json=1"; do
        # shellcheck disable=SC2086
        expect_status 2 "bad option $bad" -- "$TF" predict "$CK" "$T/val" $bad
    done
    expect_status 2 "no DATA" -- "$TF" predict "$CK" && expect_err "predict needs CKPT and DATA" "no DATA"
    [[ $failed -eq 0 ]] && echo "ok   checkpoint, shape, channels, classes, images, outputs and options refused as they should"
}

case "$MODE" in
    outputs|outputs-onednn) mode_outputs ;;
    images) mode_images ;;
    errors) mode_errors ;;
    *) die "unknown mode $MODE" ;;
esac
exit $failed
