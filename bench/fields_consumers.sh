#!/usr/bin/env bash
# fields_consumers.sh — the real consumers of data sets with fields, on the CPU: a torchvision
# detector (examples/train_detection.py, fasterrcnn_mobilenet_v3_large_320_fpn from random weights,
# 300 steps of 4 images at 192 px) on a packdata --coco set of 400 images, scored on 64 held-out
# images (AP at IoU 0.5), and a U-Net
# (examples/train_segmentation.py, 8 epochs of 320 images at 128 px) on a --mask-dir pair set,
# scored on 64 held-out images; both sets drawn on real photographs by tests/python/fields_data.py
# and read through fastload.torch. Runs tests/python/test_train_examples.sh full (which also
# checks that the loss falls and the mIoU rises) and prints its summary lines, the wall and CPU
# time of each run and the load average. Sets and logs are kept in --out.
# Usage: bench/fields_consumers.sh [--build DIR] [--out DIR (bench/out/fields)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build" out="$root/bench/out/fields"
while (($#)); do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "fields_consumers.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
done
[[ -x "$build/tools/packdata/packdata" ]] || { echo "fields_consumers.sh: build $build first" >&2; exit 1; }
mkdir -p "$out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
FL_EXAMPLES_TMP="$out" FL_BINARY_DIR="$build" FL_PACKDATA="$build/tools/packdata/packdata" \
    bash "$root/tests/python/test_train_examples.sh" full > "$out/run.log" 2>&1 ||
    { cat "$out/run.log"; echo "fields_consumers.sh: failed (log: $out/run.log)" >&2; exit 1; }
grep -E "^(train_|step 20/|step 300/|before training|epoch [18]/|loss:|mIoU:|val AP50|[0-9.]+ s wall)" "$out/run.log"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
