#!/usr/bin/env bash
# test_onednn_bf16_train.sh — trainfast train --precision bf16 on the CPU as a user runs it: on the
# synthetic fixture test_onednn_train.sh uses, a short run learns (val top-1 >= 0.95) and says it
# ran bf16 on oneDNN; a rerun with the same threads writes bit-identical checkpoints; without
# --precision the CPU still trains fp32; bf16 is refused with exit 1 and a reason on the reference
# layers and when oneDNN reports no native bf16 (ONEDNN_MAX_CPU_ISA=AVX512_CORE). Skips (77) in a
# build without oneDNN or on a CPU without native bf16 (after checking the refusal there).
set -u
B="${FL_BINARY_DIR:?}"
T="$B/trainer/trainfast"
MK="$B/tests/trainer/tf_make_dataset"
CMP="$B/tests/trainer/tf_ckpt_compare"
W="$(mktemp -d "${TMPDIR:-/tmp}/tf_bf16.XXXXXX")"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset FASTLOAD_CPU_BACKEND ONEDNN_MAX_CPU_ISA DNNL_MAX_CPU_ISA
json() { sed "s/.*\"$1\":\([0-9.e+-]*\).*/\1/" <<< "$2"; }

"$MK" "$W/train" 4000 16 16 1 4 1 || fail "fixture"
"$MK" "$W/val" 400 16 16 1 4 2 || fail "fixture"
common=(--data "$W/train" --val "$W/val" --width 8 --batch 50 --epochs 4 --seed 7 --threads 2 --quiet --json)

# refusals first (they hold on every machine)
"$T" train "${common[@]}" --precision bf16 --cpu-backend reference > "$W/r.out" 2> "$W/r.err"; rc=$?
if grep -q "built without oneDNN" "$W/r.err"; then echo "skip: no oneDNN in this build"; exit 77; fi
[[ $rc -eq 1 ]] && grep -q "oneDNN path only" "$W/r.err" && grep -q -- "--precision fp32" "$W/r.err" \
    || fail "bf16 on the reference layers: exit $rc, $(cat "$W/r.err")"
echo "ok   --precision bf16 --cpu-backend reference refused: $(cat "$W/r.err")"
ONEDNN_MAX_CPU_ISA=AVX512_CORE DNNL_MAX_CPU_ISA=AVX512_CORE \
    "$T" train "${common[@]}" --precision bf16 > "$W/n.out" 2> "$W/n.err"; rc=$?
[[ $rc -eq 1 ]] && grep -q "avx512_core_bf16" "$W/n.err" && grep -q "reports avx512_core " "$W/n.err" \
    || fail "bf16 with the ISA capped at avx512_core: exit $rc, $(cat "$W/n.err")"
echo "ok   --precision bf16 below avx512_core_bf16 refused: $(cat "$W/n.err")"

# 1. learns, in bf16 on oneDNN
"$T" train "${common[@]}" --precision bf16 --checkpoint "$W/a" > "$W/a.out" 2> "$W/a.err"; rc=$?
if [[ $rc -ne 0 ]] && grep -q "needs a CPU with native bf16" "$W/a.err"; then
    echo "skip: this CPU has no native bf16 ($(cat "$W/a.err"))"; exit 77
fi
[[ $rc -eq 0 ]] || { cat "$W/a.err"; fail "bf16 run exited $rc"; }
last=$(tail -n 1 "$W/a.out")
grep -q '"precision":"bf16"' <<< "$last" || fail "JSON precision is not bf16: $last"
grep -q '"backend":"CPU, 2 threads, oneDNN [^"]*bf16 convs[^"]*), bf16"' <<< "$last" \
    || fail "backend does not say bf16 on oneDNN: $last"
top1=$(json val_top1 "$last")
awk -v t="$top1" 'BEGIN { exit !(t >= 0.95) }' || fail "bf16 val_top1 $top1 < 0.95"
echo "ok   --precision bf16 learns: val_top1 $top1"

# 2. a rerun with the same threads: the same bits in every checkpoint
"$T" train "${common[@]}" --precision bf16 --checkpoint "$W/b" > "$W/b.out" 2> "$W/b.err" \
    || { cat "$W/b.err"; fail "bf16 rerun"; }
n=0
for f in "$W/a"/ckpt-*.tfc; do
    "$CMP" "$f" "$W/b/$(basename "$f")" || fail "rerun differs at $(basename "$f")"
    n=$((n + 1))
done
[[ $n -ge 1 ]] || fail "no checkpoints written"
[[ $(json val_loss "$last") == $(json val_loss "$(tail -n 1 "$W/b.out")") ]] || fail "rerun val_loss differs"
echo "ok   bf16 rerun bit-identical ($n checkpoints, val_loss $(json val_loss "$last"))"

# 3. the CPU default stays fp32
"$T" train "${common[@]}" --epochs 1 > "$W/c.out" 2> "$W/c.err" || { cat "$W/c.err"; fail "default run"; }
lc=$(tail -n 1 "$W/c.out")
grep -q '"precision":"fp32"' <<< "$lc" && grep -q '), fp32"' <<< "$lc" || fail "CPU default is not fp32: $lc"
echo "ok   without --precision the CPU trains fp32"
echo PASS
