#!/usr/bin/env bash
# test_train_examples.sh — the field consumers in examples/ on sets drawn on real photographs
# (tests/python/fields_data.py), packed by packdata, on the CPU:
#   detection:     packdata pack --coco ... --masks, examples/train_detection.py (torchvision
#                  fasterrcnn_mobilenet_v3_large_320_fpn, random init) through fastload.torch;
#   segmentation:  packdata pack IMAGES DST --mask-dir MASKS (train and held-out),
#                  examples/train_segmentation.py (a small U-Net), mIoU on the held-out set.
# The detector is scored on a held-out COCO set (AP at IoU 0.5) before and after training.
# Default (smoke): 10 detection steps and 4 segmentation steps, every loss finite, the summary lines
# printed. `long` as the first argument (CTest python_train_examples_long, run with FL_LONG_TESTS=1,
# else skipped) or `full` (always): the real runs of bench/README.md ("Fields: real consumers"):
# 300 detection steps whose last 20 steps' mean loss is below the first 20's and whose held-out
# AP50 rises by more than 0.1, and 8 segmentation
# epochs whose held-out mIoU after the last epoch is above the first's (20-30 minutes on 2 busy
# cores). FL_EXAMPLES_TMP=DIR keeps the sets and logs there. Exit 77 (skip) without
# torch/torchvision/PIL/skimage.
set -euo pipefail
PY=/usr/bin/python3
src="${FL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
packdata="${FL_PACKDATA:-${FL_BINARY_DIR:-$src/build}/tools/packdata/packdata}"
full=0
if [[ ${1:-} == long ]]; then
    [[ ${FL_LONG_TESTS:-0} == 1 ]] || { echo "SKIP: the full training runs need FL_LONG_TESTS=1"; exit 77; }
    full=1
fi
[[ ${1:-} == full ]] && full=1
$PY -c "import torch, torchvision, PIL, skimage" 2>/dev/null ||
    { echo "SKIP: no torch/torchvision/PIL/skimage in $PY"; exit 77; }
[[ -x "$packdata" ]] || { echo "SKIP: no packdata at $packdata"; exit 77; }
tmp="${FL_EXAMPLES_TMP:-$(mktemp -d)}"
[[ -n ${FL_EXAMPLES_TMP:-} ]] || trap 'rm -rf "$tmp"' EXIT
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
fail() { echo "FAIL: $*"; exit 1; }
gen() { [[ -d "$1" ]] || $PY "$src/tests/python/fields_data.py" coco "$1" --count "$2" --seed "$3" > /dev/null; }
# pk SRC DST OPTION...: pack once (SRC "" for --coco)
pk() { [[ -d "$2" ]] || "$packdata" pack ${1:+"$1"} "$2" "${@:3}" --quiet || fail "packdata pack $*"; }

if ((full)); then n_det=400 n_dval=64 n_seg=320 n_val=64; else n_det=16 n_dval=8 n_seg=24 n_val=12; fi
gen "$tmp/det-src" $n_det 10
gen "$tmp/dval-src" $n_dval 11
gen "$tmp/seg-src" $n_seg 20
gen "$tmp/val-src" $n_val 21
pk "" "$tmp/det" --coco "$tmp/det-src/instances.json" --root "$tmp/det-src/images" --masks
pk "" "$tmp/dval" --coco "$tmp/dval-src/instances.json" --root "$tmp/dval-src/images" --masks
pk "$tmp/seg-src/images" "$tmp/seg" --mask-dir "$tmp/seg-src/masks"
pk "$tmp/val-src/images" "$tmp/val" --mask-dir "$tmp/val-src/masks"

if ((full)); then
    det=(--val "$tmp/dval" --json)
    seg=(--json)
else
    det=(--val "$tmp/dval" --steps 10 --batch 2 --size 128 --print-every 5 --window 3 --json)
    seg=(--epochs 1 --max-steps 4 --batch 8 --size 64 --json)
fi
/usr/bin/time -f "%e s wall, %U s user" $PY "$src/examples/train_detection.py" "$tmp/det" "${det[@]}" \
    > "$tmp/det.log" 2>&1 || { cat "$tmp/det.log"; fail "train_detection.py"; }
cat "$tmp/det.log"
$PY - "$tmp/det.log" "$full" <<'EOF' || fail "train_detection.py: figures"
import json, math, sys
lines = open(sys.argv[1]).read().splitlines()
d = json.loads([l for l in lines if l.startswith("{")][-1])
assert all(math.isfinite(d[k]) for k in ("loss_start", "loss_end", "ap50_before", "ap50_after")), d
assert any(l.startswith("step ") for l in lines), "no progress line"
if sys.argv[2] == "1":
    assert d["steps"] == 300 and d["loss_end"] < d["loss_start"], f"loss did not fall: {d}"
    assert d["ap50_after"] > d["ap50_before"] + 0.1, f"held-out AP50 did not rise: {d}"
EOF
/usr/bin/time -f "%e s wall, %U s user" $PY "$src/examples/train_segmentation.py" "$tmp/seg" \
    --val "$tmp/val" "${seg[@]}" > "$tmp/seg.log" 2>&1 || { cat "$tmp/seg.log"; fail "train_segmentation.py"; }
cat "$tmp/seg.log"
$PY - "$tmp/seg.log" "$full" <<'EOF' || fail "train_segmentation.py: figures"
import json, math, sys
lines = open(sys.argv[1]).read().splitlines()
d = json.loads([l for l in lines if l.startswith("{")][-1])
assert all(math.isfinite(d[k]) for k in ("loss_first", "loss_last", "miou_first", "miou_last")), d
assert "6 classes" in lines[0], lines[0]
if sys.argv[2] == "1":
    assert d["miou_last"] > d["miou_first"], f"mIoU did not rise: {d}"
EOF
echo "PASS"
