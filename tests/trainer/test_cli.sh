#!/usr/bin/env bash
# test_cli.sh — trainfast as a user runs it: trains a synthetic dataset; a run stopped by a real
# SIGTERM and resumed ends with weights bit-identical to an uninterrupted run; damaged checkpoints
# give clear errors; doctor runs; --device cuda without a GPU fails clearly.
set -u
B="${FL_BINARY_DIR:?}"
T="$B/trainer/trainfast"
MK="$B/tests/trainer/tf_make_dataset"
CMP="$B/tests/trainer/tf_ckpt_compare"
W="$(mktemp -d "${TMPDIR:-/tmp}/tf_cli.XXXXXX")"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$MK" "$W/train" 4000 16 16 1 4 1 || fail "fixture"
"$MK" "$W/val" 400 16 16 1 4 2 || fail "fixture"
common=(--data "$W/train" --val "$W/val" --width 8 --batch 50 --epochs 4 --seed 7 --threads 2 --quiet)

# 1. uninterrupted run: trains, JSON summary is the last stdout line
"$T" train "${common[@]}" --checkpoint "$W/a" --json --log "$W/a.jsonl" > "$W/a.out" 2> "$W/a.err" \
    || { cat "$W/a.err"; fail "reference run"; }
last=$(tail -n 1 "$W/a.out")
for k in val_top1 val_loss epochs images_per_sec data_wait_fraction device precision wall_seconds; do
    grep -q "\"$k\"" <<< "$last" || fail "JSON summary lacks $k: $last"
done
top1=$(sed 's/.*"val_top1":\([0-9.e-]*\).*/\1/' <<< "$last")
awk -v t="$top1" 'BEGIN { exit !(t >= 0.95) }' || fail "val_top1 $top1 < 0.95"
[[ $(wc -l < "$W/a.jsonl") -eq 4 ]] || fail "expected 4 JSONL epoch lines"
echo "ok   reference run: val_top1 $top1"

# 2. the same run, killed with SIGTERM mid-training, then resumed
"$T" train "${common[@]}" --checkpoint "$W/b" --checkpoint-every 7 > /dev/null 2> "$W/b.err" &
pid=$!
for _ in $(seq 1 600); do
    compgen -G "$W/b/ckpt-*.tfc" > /dev/null && break
    sleep 0.02
done
kill -TERM "$pid"
wait "$pid"
rc=$?
[[ $rc -eq 143 ]] || { cat "$W/b.err"; fail "SIGTERM run exited $rc, expected 143 (run too short?)"; }
grep -q "stopped by SIGTERM at epoch" "$W/b.err" || fail "no stop line: $(cat "$W/b.err")"
grep -q "continue with --resume" "$W/b.err" || fail "stop line does not say how to continue"
echo "ok   SIGTERM: $(grep 'stopped by' "$W/b.err")"
"$T" train "${common[@]}" --checkpoint "$W/b" --resume 2> "$W/b2.err" > /dev/null \
    || { cat "$W/b2.err"; fail "resumed run"; }
fa=$(ls "$W/a"/ckpt-*.tfc | sort | tail -n 1)
fb=$(ls "$W/b"/ckpt-*.tfc | sort | tail -n 1)
[[ $(basename "$fa") == $(basename "$fb") ]] || fail "final checkpoints differ in step: $fa $fb"
"$CMP" "$fa" "$fb" || fail "resumed weights differ from the uninterrupted run"
echo "ok   resumed run is bit-identical to the uninterrupted one"

# 3. eval of a checkpoint; damaged checkpoints
"$T" eval "$fa" "$W/val" --json > "$W/e.out" || fail "eval"
grep -q '"top1"' "$W/e.out" || fail "eval JSON: $(cat "$W/e.out")"
cp "$fa" "$W/bad.tfc"
printf '\xff' | dd of="$W/bad.tfc" bs=1 seek=5000 conv=notrunc 2> /dev/null
"$T" eval "$W/bad.tfc" "$W/val" 2> "$W/bad.err" && fail "damaged checkpoint accepted"
grep -q "bad.tfc: checksum mismatch" "$W/bad.err" || fail "damaged: $(cat "$W/bad.err")"
head -c 3000 "$fa" > "$W/short.tfc"
"$T" eval "$W/short.tfc" "$W/val" 2> "$W/short.err" && fail "truncated checkpoint accepted"
grep -q "short.tfc: truncated" "$W/short.err" || fail "truncated: $(cat "$W/short.err")"
mkdir -p "$W/c" && cp "$W/bad.tfc" "$W/c/ckpt-00000099.tfc"
"$T" train "${common[@]}" --checkpoint "$W/c" --resume 2> "$W/c.err" && fail "resume from damaged accepted"
grep -q "no valid checkpoint" "$W/c.err" || fail "resume damaged: $(cat "$W/c.err")"
echo "ok   damaged/truncated checkpoints: $(head -n 1 "$W/bad.err")"

# 4. doctor and --device cuda
"$T" doctor > "$W/doc.out" || fail "doctor exit status"
"$T" doctor --json > "$W/doc.json" || fail "doctor --json"
grep -q '"gpu_count"' "$W/doc.json" || fail "doctor json"
if grep -q '"gpu_count":0' "$W/doc.json"; then
    grep -q "no GPU" "$W/doc.out" || fail "doctor does not say no GPU: $(cat "$W/doc.out")"
    "$T" train "${common[@]}" --device cuda 2> "$W/cuda.err" && fail "--device cuda without GPU succeeded"
    grep -q -- "--device cuda" "$W/cuda.err" || fail "--device cuda error: $(cat "$W/cuda.err")"
    echo "ok   no GPU: doctor says so; --device cuda: $(cat "$W/cuda.err")"
fi
"$T" train --data "$W/train" 2> /dev/null; [[ $? -eq 2 ]] || fail "missing --val should be a usage error"
"$T" train "${common[@]}" --bogus 2> /dev/null; [[ $? -eq 2 ]] || fail "unknown option should be a usage error"
echo PASS
