#!/usr/bin/env bash
# test_refusals.sh MODE — trainfast refuses what would silently give a wrong
# result, does right what it used to do wrong, and reports what it used to lose. One mode per CTest:
#   val      --val labelling its classes differently from --data (other names, other order, fewer
#            with other names, more) exits 2 naming both datasets and the first difference; a val
#            set holding the first classes of --data under the same names is accepted with a note;
#            --val naming the training data itself is accepted with a note saying so;
#            `eval` checks its data against the classes recorded in the checkpoint the same way
#   resume   --resume with any option that defines the run changed (model, width, residual, gelu,
#            seed, batch, accum, epochs, lr, wd, momentum, nesterov, label smoothing, schedule,
#            warm-up, EMA, crop, flip, another --data) exits 2 naming the option and both values;
#            --threads/--workers/--log/--val/--no-tta may change
#   accum    --accum 8 on 7 batches per epoch takes 1 optimizer step (was none, reported as 7),
#            equal to --accum 7; 3 groups of 3,3,1 per epoch; a run stopped by SIGTERM inside an
#            accumulation group and resumed is bit-identical to the uninterrupted one
#   diverge  --lr 100 stops with exit 1 naming the step, epoch and --lr; no checkpoint is
#            written at or after the diverged step, the ones before it still load
#   write    --log /dev/full, --json > /dev/full, eval > /dev/full, --checkpoint under a file:
#            exit 1 naming the file and the reason (the log was lost with exit 0)
# TRAINFAST=path and TF_MAKE_DATASET=path override the binaries (to run these against an older
# build).
set -u
MODE="${1:?usage: test_refusals.sh val|resume|accum|diverge|write}"
B="${FL_BINARY_DIR:?}"
T="${TRAINFAST:-$B/trainer/trainfast}"
MK="${TF_MAKE_DATASET:-$B/tests/trainer/tf_make_dataset}"
CMP="$B/tests/trainer/tf_ckpt_compare"
W="$(mktemp -d "${TMPDIR:-/tmp}/tf_refuse.XXXXXX")"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
json_field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" <<< "$2"; }
# expect_rc RC NAME CMD...: run CMD, stderr to $W/NAME.err; fail unless it exits RC
expect_rc() {
    local want=$1 name=$2
    shift 2
    "$@" > "$W/$name.out" 2> "$W/$name.err"
    local rc=$?
    [[ $rc -eq $want ]] || fail "$name: exit $rc, expected $want: $(cat "$W/$name.err")"
}
# has NAME TEXT...: $W/NAME.err contains every TEXT (fixed strings)
has() {
    local name=$1
    shift
    for t in "$@"; do
        grep -qF -- "$t" "$W/$name.err" || fail "$name: message lacks '$t': $(cat "$W/$name.err")"
    done
}

"$MK" "$W/tr" 500 8 8 1 4 1 > /dev/null || fail "fixture"
"$MK" "$W/va" 100 8 8 1 4 2 > /dev/null || fail "fixture"
small=(--width 4 --threads 1 --workers 1 --device cpu --quiet)

case "$MODE" in
val)
    "$MK" "$W/va_order" 100 8 8 1 4 2 class0,class2,class1,class3 > /dev/null || fail "fixture"
    "$MK" "$W/va_names" 100 8 8 1 4 2 cat,dog,bird,fish > /dev/null || fail "fixture"
    "$MK" "$W/va_fewer" 100 8 8 1 2 2 class1,class3 > /dev/null || fail "fixture"
    "$MK" "$W/va_more" 100 8 8 1 5 2 > /dev/null || fail "fixture"
    "$MK" "$W/va_first" 100 8 8 1 2 2 > /dev/null || fail "fixture"
    run=(train --data "$W/tr" "${small[@]}" --batch 50 --epochs 1)
    expect_rc 2 order "$T" "${run[@]}" --val "$W/va_order"
    has order "$W/va_order" "$W/tr" "label 1 is 'class2' in --val, 'class1' in --data"
    expect_rc 2 names "$T" "${run[@]}" --val "$W/va_names"
    has names "$W/va_names" "$W/tr" "label 0 is 'cat' in --val, 'class0' in --data"
    expect_rc 2 fewer "$T" "${run[@]}" --val "$W/va_fewer"
    has fewer "$W/va_fewer" "label 0 is 'class1' in --val, 'class0' in --data"
    expect_rc 2 more "$T" "${run[@]}" --val "$W/va_more"
    has more "$W/va_more" "has 5 classes" "$W/tr"
    echo "ok   refused: $(cat "$W/order.err")"
    expect_rc 0 first "$T" train --data "$W/tr" --width 4 --threads 1 --device cpu --batch 50 \
        --epochs 1 --val "$W/va_first"
    has first "has 2 of the 4 classes" "from 'class2' on none"
    expect_rc 0 same "$T" "${run[@]}" --val "$W/va" --checkpoint "$W/c"
    grep -qF "is the data set --data trains on" "$W/same.err" && fail "same: a note for a held-out --val"
    # --val naming the training data itself (the path, or another path to it): accepted with a
    # note that its accuracy is not a held-out one
    ln -s "$W/tr" "$W/tr_link"
    expect_rc 0 valdata "$T" train --data "$W/tr" --width 4 --threads 1 --device cpu --batch 50 \
        --epochs 1 --val "$W/tr_link"
    has valdata "note: --val $W/tr_link is the data set --data trains on" "not how it does on new ones"
    echo "ok   accepted: the same classes; the first 2 of 4 under the same names (with a note);"
    echo "     --val the training data (with a note)"
    # eval checks the data against the classes the checkpoint was trained on
    expect_rc 2 eval_order "$T" eval "$W/c" "$W/va_order" --device cpu
    has eval_order "$W/va_order" "label 1 is 'class2' in $W/va_order, 'class1' in training"
    expect_rc 2 eval_more "$T" eval "$W/c" "$W/va_more" --device cpu
    expect_rc 0 eval_first "$T" eval "$W/c" "$W/va_first" --device cpu
    expect_rc 0 eval_same "$T" eval "$W/c" "$W/va" --device cpu
    echo "ok   eval: $(cat "$W/eval_order.err" | tail -n 1)"
    ;;
resume)
    "$MK" "$W/tr2" 500 8 8 1 4 9 > /dev/null || fail "fixture"
    same=(--val "$W/va" --width 4 --threads 1 --device cpu --quiet --epochs 2 --seed 3 --lr 0.2
          --checkpoint "$W/c")
    base=(train --data "$W/tr" "${same[@]}" --batch 50)
    expect_rc 0 first "$T" "${base[@]}"
    # each: the changed options, then the text the refusal must hold
    checks=(
        "--model resnet18|--model resnet18 differs from the checkpoint's --model fastcnn"
        "--width 8|--width 8 differs from the checkpoint's --width 4"
        "--residual|--residual was absent when the checkpoint was written, given now"
        "--gelu|--gelu was absent"
        "--seed 4|--seed 4 differs from the checkpoint's --seed 3"
        "--batch 25|--batch 25 on 1 process(es) (global batch 25) differs from the checkpoint's --batch 50"
        "--accum 2|--accum 2 differs from the checkpoint's --accum 1"
        "--epochs 3|--epochs 3 differs from the checkpoint's --epochs 2"
        "--lr 0.1|--lr 0.1 differs from the checkpoint's --lr 0.2"
        "--wd 0|--wd 0 differs"
        "--momentum 0.5|--momentum 0.5 differs"
        "--no-nesterov|--no-nesterov was absent when the checkpoint was written, given now"
        "--label-smoothing 0|--label-smoothing 0 differs"
        "--schedule cosine|--schedule cosine differs from the checkpoint's --schedule linear"
        "--warmup 1|--warmup 1 differs"
        "--ema 0.9|--ema 0.9 differs from the checkpoint's --ema 0"
        "--crop-pad 2|--crop-pad 2 differs from the checkpoint's --crop-pad 0"
        "--no-flip|--no-flip was absent"
    )
    i=0
    for c in "${checks[@]}"; do
        read -r -a opts <<< "${c%%|*}"
        i=$((i + 1))
        expect_rc 2 "opt$i" "$T" "${base[@]}" "${opts[@]}" --resume
        has "opt$i" "${c#*|}" "$W/c/ckpt-"
    done
    echo "ok   ${#checks[@]} changed options refused, e.g. $(cat "$W/opt2.err")"
    expect_rc 2 data "$T" train --data "$W/tr2" "${same[@]}" --batch 50 --resume
    has data "--data is not the dataset the checkpoint was trained on"
    echo "ok   another --data refused: $(cat "$W/data.err")"
    # options that may change on resume
    expect_rc 0 allowed "$T" "${base[@]}" --resume --threads 2 --workers 2 --log "$W/l.jsonl" \
        --no-tta --checkpoint-every 3
    expect_rc 0 batch_left_out "$T" train --data "$W/tr" "${same[@]}" --resume
    echo "ok   --threads/--workers/--log/--no-tta/--checkpoint-every may change; --batch may be left out"
    ;;
accum)
    # 500 images / batch 64 = 7 full batches per epoch
    run=(train --data "$W/tr" --val "$W/va" "${small[@]}" --batch 64 --json)
    expect_rc 0 a8 "$T" "${run[@]}" --epochs 1 --accum 8 --checkpoint "$W/a8"
    last=$(tail -n 1 "$W/a8.out")
    [[ $(json_field steps "$last") == 1 && $(json_field micro_steps "$last") == 7 ]] \
        || fail "--accum 8 on 7 batches: expected 1 optimizer step of 7 micro-batches: $last"
    expect_rc 0 a7 "$T" "${run[@]}" --epochs 1 --accum 7 --checkpoint "$W/a7"
    "$CMP" "$W/a8/ckpt-00000007.tfc" "$W/a7/ckpt-00000007.tfc" \
        || fail "the partial group of 7 (--accum 8) differs from a full group of 7 (--accum 7)"
    echo "ok   --accum 8 on 7 batches: 1 step, equal to --accum 7 (mean of the 7 gradients)"
    expect_rc 0 a3 "$T" "${run[@]}" --epochs 2 --accum 3
    last=$(tail -n 1 "$W/a3.out")
    [[ $(json_field steps "$last") == 6 ]] || fail "--accum 3, 2 epochs of 7 batches: expected 6 steps: $last"
    echo "ok   --accum 3: groups of 3, 3, 1: 6 steps in 2 epochs"
    # resume inside an accumulation group: 4000 images / 20 = 200 batches (66 groups of 3 + 2)
    "$MK" "$W/big" 4000 8 8 1 4 5 > /dev/null || fail "fixture"
    long=(train --data "$W/big" --val "$W/va" "${small[@]}" --batch 20 --accum 3 --epochs 3)
    expect_rc 0 ref "$T" "${long[@]}" --checkpoint "$W/ref"
    "$T" "${long[@]}" --checkpoint "$W/int" --checkpoint-every 7 > /dev/null 2> "$W/int.err" &
    pid=$!
    for _ in $(seq 1 1000); do
        compgen -G "$W/int/ckpt-*.tfc" > /dev/null && break
        sleep 0.01
    done
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    [[ $rc -eq 143 ]] || fail "SIGTERM run exited $rc, expected 143: $(cat "$W/int.err")"
    expect_rc 0 res "$T" "${long[@]}" --checkpoint "$W/int" --resume
    "$CMP" "$W/ref/ckpt-00000600.tfc" "$W/int/ckpt-00000600.tfc" \
        || fail "resumed --accum 3 run differs from the uninterrupted one"
    echo "ok   --accum 3 stopped at $(grep -o 'step [0-9]*' "$W/int.err" | head -n 1) and resumed: bit-identical"
    ;;
diverge)
    expect_rc 1 lr "$T" train --data "$W/tr" --val "$W/va" "${small[@]}" --batch 50 --epochs 3 \
        --lr 100 --checkpoint "$W/c" --checkpoint-every 1
    has lr "loss became" "lower --lr (now 100)" "(epoch 1" "last checkpoint kept"
    step=$(sed -n 's/.* at step \([0-9]*\) .*/\1/p' "$W/lr.err")
    [[ -n "$step" ]] || fail "no step number: $(cat "$W/lr.err")"
    for f in "$W/c"/ckpt-*.tfc; do
        [[ -e "$f" ]] || continue
        n=$(basename "$f" .tfc)
        n=$((10#${n#ckpt-}))
        [[ $n -lt $step ]] || fail "checkpoint $f written at or after the diverged step $step"
    done
    expect_rc 0 eval "$T" eval "$W/c" "$W/va" --device cpu
    echo "ok   $(cat "$W/lr.err")"
    ;;
write)
    run=(train --data "$W/tr" --val "$W/va" "${small[@]}" --batch 50 --epochs 1)
    expect_rc 1 log "$T" "${run[@]}" --log /dev/full
    has log "/dev/full" "No space left on device"
    expect_rc 1 json sh -c '"$0" "$@" > /dev/full' "$T" "${run[@]}" --json
    has json "stdout" "No space left on device"
    expect_rc 1 ck "$T" "${run[@]}" --checkpoint "$W/tr/manifest.json/ck"
    has ck "manifest.json/ck"
    expect_rc 0 ok "$T" "${run[@]}" --checkpoint "$W/c" --log "$W/l.jsonl"
    [[ $(wc -l < "$W/l.jsonl") -eq 1 ]] || fail "log: $(cat "$W/l.jsonl")"
    expect_rc 1 eval sh -c '"$0" "$@" > /dev/full' "$T" eval "$W/c" "$W/va" --device cpu --json
    has eval "stdout" "No space left on device"
    # a device this build or machine cannot use: one clear error (or a run, on a GPU machine),
    # nothing leaked on the way out (a refused --device used to leak the loaded checkpoint and
    # model; the ASan build's LeakSanitizer reports it on stderr, keeping the exit status 1)
    "$T" eval "$W/c" "$W/va" --device cuda > "$W/cuda.out" 2> "$W/cuda.err"
    rc=$?
    [[ $rc -eq 0 || $rc -eq 1 ]] || fail "eval --device cuda: exit $rc: $(tail -n 3 "$W/cuda.err")"
    ! grep -q "Sanitizer" "$W/cuda.err" || fail "eval --device cuda: $(grep -m1 Sanitizer "$W/cuda.err")"
    echo "ok   $(cat "$W/log.err")"
    ;;
*)
    fail "unknown mode $MODE"
    ;;
esac
echo PASS
