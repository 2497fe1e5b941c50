#!/usr/bin/env bash
# test_onednn_serial.sh — the oneDNN path's serial mode changes where ops run, never what they
# compute: fastcnn and resnet18 (2 oneDNN threads, BN on the host kernels) trained with
# TRAINFAST_SERIAL_OPS=never (all threads), always (BN and the element-wise ops on one thread),
# alternate (switching every step) and auto (the default) end with the same checkpoint bit for
# bit; an unknown value is refused by name (exit 1). In a build without oneDNN: skip (77).
set -u
B="${FL_BINARY_DIR:?}"
T="$B/trainer/trainfast"
MK="$B/tests/trainer/tf_make_dataset"
CMP="$B/tests/trainer/tf_ckpt_compare"
W="$(mktemp -d "${TMPDIR:-/tmp}/tf_serial.XXXXXX")"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset FASTLOAD_CPU_BACKEND TRAINFAST_SERIAL_OPS

"$MK" "$W/train" 384 32 32 3 4 1 >/dev/null || fail "fixture"
"$MK" "$W/val" 64 32 32 3 4 2 >/dev/null || fail "fixture"
for model in fastcnn resnet18; do
    ref=""
    for mode in never always alternate auto; do
        out="$W/$model-$mode"
        TRAINFAST_SERIAL_OPS=$mode "$T" train --data "$W/train" --val "$W/val" --model "$model" \
            --batch 64 --epochs 1 --seed 5 --threads 2 --device cpu --cpu-backend onednn --quiet --json \
            --checkpoint "$out" > "$out.json" 2> "$out.err"
        rc=$?
        if grep -q "built without oneDNN" "$out.err"; then
            echo "skip: this trainfast was built without oneDNN"
            exit 77
        fi
        [[ $rc -eq 0 ]] || { cat "$out.err"; fail "$model with TRAINFAST_SERIAL_OPS=$mode exited $rc"; }
        grep -q 'oneDNN [^"]*2 threads' "$out.json" ||
            fail "$model did not run on 2 oneDNN threads: $(tail -n 1 "$out.json")"
        ck=$(ls "$out"/*.tfc | sort | tail -n 1)
        if [[ -z $ref ]]; then
            ref=$ck
        else
            "$CMP" "$ref" "$ck" > "$W/cmp" 2>&1 ||
                fail "$model: TRAINFAST_SERIAL_OPS=$mode changed the checkpoint: $(cat "$W/cmp")"
        fi
    done
    echo "ok   $model: never, always, alternate and auto give one checkpoint"
done
TRAINFAST_SERIAL_OPS=sometimes "$T" train --data "$W/train" --val "$W/val" --model fastcnn \
    --epochs 1 --threads 2 --device cpu --cpu-backend onednn --quiet --checkpoint "$W/bad" > /dev/null 2> "$W/bad.err"
rc=$?
[[ $rc -eq 1 ]] || fail "TRAINFAST_SERIAL_OPS=sometimes exited $rc, expected 1"
grep -q 'TRAINFAST_SERIAL_OPS=sometimes: expected auto, never, always or alternate' "$W/bad.err" ||
    fail "the refusal does not say why: $(cat "$W/bad.err")"
echo "ok   TRAINFAST_SERIAL_OPS=sometimes is refused: $(cat "$W/bad.err")"
