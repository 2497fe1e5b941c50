#!/usr/bin/env bash
# onnx_check.sh — tests/gpu/check.sh's ONNX step for a model trained on the GPU:
# export CKPT with `trainfast export`, check the file with onnx.checker, run it with the Python
# onnxruntime (CPU provider, fp32) over DATA's images, and compare on the same pixels with
#   - `trainfast predict --device cpu --logits` (fp32, the reference): max |diff| <= 1e-4 x the
#     row's largest |logit|, argmax identical on >= 99.9% of the images;
#   - `trainfast eval --device cpu --no-tta`: the same top-1;
#   - `trainfast predict --device DEVICE` (bf16 on a GPU): its difference and argmax agreement,
#     reported as figures (bf16 keeps ~3 digits: no 1e-4 bound there).
# The last stdout line is one JSON object with the figures; exit 0 when the fp32 bounds hold,
# 1 when one fails, 77 when onnx / onnxruntime are missing from PYTHON or trainfast was built
# without ONNX export (skip).
# Usage: tests/gpu/onnx_check.sh BUILD CKPT DATA OUTDIR [DEVICE]   (DEVICE default cuda)
# Environment: PYTHON (default python3; the GPU machine's has onnx and onnxruntime).
set -uo pipefail
[[ $# -ge 4 ]] || { sed -n '2,14p' "$0"; exit 2; }
build=$1 ckpt=$2 data=$3 out=$4 device=${5:-cuda}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
TF="$build/trainer/trainfast" DUMP="$build/tests/trainer/tf_dump_pixels" CHECK="$root/tests/trainer/onnx_check.py"
mkdir -p "$out"
say() { echo "onnx_check: $*"; }
for t in "$TF" "$DUMP"; do [[ -x $t ]] || { say "$t not built"; exit 1; }; done
"$PYTHON" -c "import onnx, numpy" 2> /dev/null || { say "skip: $PYTHON lacks onnx or numpy"; exit 77; }
# ONNX Runtime: the Python package (the GPU machine's); else onnxruntime-node where setup.sh put it
# (the CPU machine, for a dry run of this script)
runner=python
if ! "$PYTHON" -c "import onnxruntime" 2> /dev/null; then
    export FL_ORT_NODE_MODULES="${FL_ORT_NODE_MODULES:-$root/.deps/onnxruntime/node_modules}"
    command -v node > /dev/null && [[ -d $FL_ORT_NODE_MODULES/onnxruntime-node ]] ||
        { say "skip: no onnxruntime (neither $PYTHON's nor onnxruntime-node)"; exit 77; }
    runner=node
fi

"$TF" export "$ckpt" -o "$out/model.onnx" --json > "$out/export.json" 2> "$out/export.err"
rc=$?
if ((rc == 2)) && grep -q "built without ONNX export" "$out/export.err"; then
    say "skip: $(cat "$out/export.err")"
    exit 77
fi
((rc == 0)) || { say "export failed: $(cat "$out/export.err")"; exit 1; }
say "export: $(tail -1 "$out/export.json")"
read -r C H W K < <("$PYTHON" -c "import json,sys; j=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(*j['input'], j['classes'])" "$out/export.json")
"$PYTHON" "$CHECK" check "$out/model.onnx" "$C" "$H" "$W" "$K" > "$out/checker.json" ||
    { say "onnx.checker: $(cat "$out/checker.json")"; exit 1; }
say "onnx.checker: ok"
"$DUMP" "$data" 0 "$out/px.npy" "$out/y.npy" > /dev/null || { say "cannot read the pixels of $data"; exit 1; }
if [[ $runner == python ]]; then
    "$PYTHON" "$CHECK" run "$out/model.onnx" "$out/px.npy" "$out/ort.npy" 256 > "$out/ort.json"
else
    node "$root/tests/trainer/onnx_run.js" "$out/model.onnx" "$out/px.npy" "$out/ort.npy" 256 > "$out/ort.json"
fi || { say "onnxruntime ($runner) run failed: $(tail -2 "$out/ort.json")"; exit 1; }
say "onnxruntime: $(tail -1 "$out/ort.json")"
"$TF" predict "$ckpt" "$data" --device cpu --logits "$out/pred_cpu.npy" --json > /dev/null 2> "$out/pred_cpu.err" ||
    { say "predict --device cpu: $(tail -1 "$out/pred_cpu.err")"; exit 1; }
"$TF" eval "$ckpt" "$data" --device cpu --no-tta --json > "$out/eval_cpu.json" 2> /dev/null ||
    { say "eval --device cpu failed"; exit 1; }
dev_ok=1
if [[ $device != cpu ]]; then
    "$TF" predict "$ckpt" "$data" --device "$device" --logits "$out/pred_dev.npy" --json > "$out/pred_dev.out" 2> "$out/pred_dev.err" ||
        { say "predict --device $device: $(tail -1 "$out/pred_dev.err")"; dev_ok=0; }
fi
"$PYTHON" - "$out" "$device" "$dev_ok" <<'EOF'
import json, os, sys
import numpy as np
out, device, dev_ok = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
a = np.load(f"{out}/ort.npy").astype(np.float64)
p = np.load(f"{out}/pred_cpu.npy").astype(np.float64)
y = np.load(f"{out}/y.npy")
ev = json.loads(open(f"{out}/eval_cpu.json").read().strip().splitlines()[-1])
ort = json.loads(open(f"{out}/ort.json").read().strip().splitlines()[-1])
def cmp(ref):
    rel = np.abs(a - ref).max(1) / np.maximum(np.abs(ref).max(1), 1e-30)
    return float(rel.max()), float((a.argmax(1) == ref.argmax(1)).mean())
n = len(y)
r = {"images": n, "onnxruntime": ort.get("onnxruntime") or "node " + str(ort.get("onnxruntime_node")),
     "ort_images_per_sec": ort["images_per_sec"]}
r["max_rel_cpu"], r["argmax_agree_cpu"] = cmp(p)
r["top1_ort"], r["top1_eval_cpu"] = float((a.argmax(1) == y).mean()), ev["top1"]
r["top1_equal"] = int((a.argmax(1) == y).sum()) == round(ev["top1"] * ev["images"]) and ev["images"] == n
if device != "cpu" and dev_ok and os.path.exists(f"{out}/pred_dev.npy"):
    r["max_rel_dev"], r["argmax_agree_dev"] = cmp(np.load(f"{out}/pred_dev.npy").astype(np.float64))
r["pass"] = r["max_rel_cpu"] <= 1e-4 and r["argmax_agree_cpu"] >= 0.999 and r["top1_equal"]
print(json.dumps(r))
sys.exit(0 if r["pass"] else 1)
EOF
