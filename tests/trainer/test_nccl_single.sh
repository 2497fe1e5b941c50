#!/usr/bin/env bash
# test_nccl_single.sh — GPU (label gpu, run by tests/gpu/check.sh): the NCCL data-parallel path of
# trainfast with world size 1 (`--nccl`: gradients averaged by ncclAllReduce/ncclAvg over one rank
# inside the CUDA backend) trains to the same weights as the plain single-GPU run. Registered only
# in builds with the CUDA backend and NCCL; skips (77) when no GPU is visible.
set -u
B="${FL_BINARY_DIR:?}"
T="$B/trainer/trainfast"
MK="$B/tests/trainer/tf_make_dataset"
DIFF="$B/tests/trainer/tf_ckpt_diff"
CMP="$B/tests/trainer/tf_ckpt_compare"
W="$(mktemp -d "${TMPDIR:-/tmp}/tf_nccl.XXXXXX")"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$T" doctor --json > "$W/doc.json" 2> /dev/null
if grep -q '"gpu_count":0' "$W/doc.json" || ! grep -q '"gpu_count"' "$W/doc.json"; then
    echo "SKIP: no GPU"
    exit 77
fi
"$MK" "$W/train" 2000 16 16 1 4 1 > /dev/null || fail "fixture"
"$MK" "$W/val" 200 16 16 1 4 2 > /dev/null || fail "fixture"
common=(--data "$W/train" --val "$W/val" --width 16 --batch 100 --epochs 2 --seed 5 --device cuda
        --precision fp32 --no-tta)
"$T" train "${common[@]}" --checkpoint "$W/plain" --quiet > /dev/null 2> "$W/plain.err" \
    || { cat "$W/plain.err"; fail "plain GPU run"; }
"$T" train "${common[@]}" --checkpoint "$W/nccl" --nccl > /dev/null 2> "$W/nccl.err" \
    || { cat "$W/nccl.err"; fail "--nccl GPU run"; }
grep -q "gradients averaged over 1 GPU process(es) with NCCL" "$W/nccl.err" \
    || fail "the --nccl run did not use NCCL: $(cat "$W/nccl.err")"
a="$W/plain/ckpt-00000040.tfc"
b="$W/nccl/ckpt-00000040.tfc"
[[ -f "$a" && -f "$b" ]] || fail "final checkpoints missing: $(ls "$W/plain" "$W/nccl")"
if "$CMP" "$a" "$b" > "$W/cmp.out"; then
    echo "ok   NCCL world 1 == plain run: bit-identical ($(cat "$W/cmp.out"))"
else
    # ncclAvg over one rank is the identity; a difference can only come from cuDNN's
    # non-deterministic algorithms, which a second plain run would show as well
    "$DIFF" "$a" "$b" 1e-3 || fail "NCCL world-1 weights differ from the plain run beyond 1e-3"
    echo "ok   NCCL world 1 matches the plain run within 1e-3 (not bit-identical: $(head -n 1 "$W/cmp.out"))"
fi
echo PASS
