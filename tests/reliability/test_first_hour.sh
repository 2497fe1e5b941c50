#!/usr/bin/env bash
# test_first_hour.sh — what a newcomer tries in the first hour, on a tiny set: the README's next
# commands (eval, predict, export) on the checkpoint a training run keeps; `fastload bench` says
# how many samples of an epoch are repeats filling the last batch; the --log (and so the report)
# carries val top-5 on a 10-class set, as eval prints it; predict's stderr summary comes after
# its stdout lines; examples/pytorch_train.py --help shows its --epochs default and Ctrl-C ends it
# with one line and exit 130, no traceback.
. "$(dirname "$0")/lib.sh"
need "$P" "$FLT" "$MKIDX" "$TF"
make_train_data "$T/data" 300 100 || die "fixture"

# bench: 300 records at batch 256 = 2 batches = 512 samples, 212 of them repeats
"$FLT" bench "$T/data/train" --batch 256 --epochs 1 >"$T/bench.txt" 2>"$T/err" || die "bench: $(cat "$T/err")"
grep -q "epoch: 300 records + 212 repeated to fill the last batch = 512 samples" "$T/bench.txt" &&
    pass "bench: $(grep 'epoch:' "$T/bench.txt" | sed 's/^ *//')" || fail "bench does not say the epoch is padded: $(grep result "$T/bench.txt")"
"$FLT" bench "$T/data/train" --batch 256 --epochs 1 --json >"$T/bench.json" 2>"$T/err" || die "bench --json"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["dataset"]; assert d["padded_per_epoch"]==212 and d["samples_per_epoch"]==512, d' \
    "$T/bench.json" 2>/dev/null && pass "bench --json: padded_per_epoch 212" || fail "bench --json lacks padded_per_epoch 212"

# train (10 classes): the log carries val_top5 like eval; the checkpoint serves eval/predict/export
"$TF" train --data "$T/data/train" --val "$T/data/val" --width 4 --batch 50 --epochs 1 --seed 1 --threads 2 \
    --quiet --checkpoint "$T/ck" --log "$T/log.jsonl" >/dev/null 2>"$T/err" || die "train: $(cat "$T/err")"
grep -q '"val_top5"' "$T/log.jsonl" && pass "--log has val_top5 on 10 classes" || fail "--log lacks val_top5 (report shows '-')"
ck=$(newest_ckpt "$T/ck")
expect_status 0 "README: trainfast eval CKPT DATA" -- "$TF" eval "$ck" "$T/data/val"
grep -q "top5" "$T/out" || fail "eval prints no top5: $(cat "$T/out")"
expect_status 0 "README: trainfast predict CKPT DATA --top 3" -- "$TF" predict "$ck" "$T/data/val" --top 3
expect_status 0 "README: trainfast export CKPT -o FILE" -- "$TF" export "$ck" -o "$T/m.onnx" ||
    grep -q "without\|not built" "$T/err"

# predict, stdout and stderr into one file: the summary after every per-image line
"$TF" predict "$ck" "$T/data/val" >"$T/both.txt" 2>&1 || fail "predict: $(tail -2 "$T/both.txt")"
last=$(grep -v "no GPU" "$T/both.txt" | tail -n 1)
[[ $last == *"predicted 100 images"* ]] && pass "predict: the summary comes last with 2>&1" ||
    fail "predict 2>&1: last line is '$last', want the summary (interleaved)"

# examples/pytorch_train.py: --help defaults, Ctrl-C
PY=/usr/bin/python3
ex="$(cd "$(dirname "$0")/../.." && pwd)/examples/pytorch_train.py"
if sanitized || ! $PY -c "import torch" 2>/dev/null; then
    echo "note: no torch for $PY (or a sanitized build): examples/pytorch_train.py not run"
else
    export PYTHONPATH="$(dirname "$ex")/../python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1
    $PY "$ex" --help --device cpu >"$T/help.txt" 2>&1
    grep -A1 -- "--epochs EPOCHS" "$T/help.txt" | grep -q "(default: 2)" && pass "pytorch_train.py --help: --epochs (default: 2)" ||
        fail "pytorch_train.py --help hides the --epochs default: $(grep -A1 -- '--epochs EPOCHS' "$T/help.txt" | tail -1)"
    env --default-signal=INT $PY "$ex" "$T/data/train" --device cpu --epochs 50 --batch 10 --workers 1 --print-every 1 \
        >"$T/ex.out" 2>"$T/ex.err" &
    pid=$!
    for _ in $(seq 600); do grep -q "batch 2/" "$T/ex.out" "$T/ex.err" 2>/dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
    kill -INT $pid 2>/dev/null
    wait $pid
    st=$?
    if [[ $st -eq 130 ]] && ! grep -q Traceback "$T/ex.err" && grep -q "interrupted" "$T/ex.err"; then
        pass "pytorch_train.py Ctrl-C: exit 130, $(grep interrupted "$T/ex.err")"
    else
        fail "pytorch_train.py Ctrl-C: exit $st, $(grep -c Traceback "$T/ex.err") traceback(s): $(tail -2 "$T/ex.err")"
    fi
fi
finish
