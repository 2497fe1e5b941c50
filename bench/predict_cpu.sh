#!/usr/bin/env bash
# predict_cpu.sh — `trainfast predict` on the CPU: inference images/s
# against what training's forward pass implies, on Fashion-MNIST (samples/fashion-mnist, fastcnn
# at its defaults, all cores). Interleaved rounds, each: `trainfast train` for one epoch on the
# 10,000-image test split (its images/s over the training loop: forward + backward + update),
# then `trainfast predict` of that run's checkpoint over the same 10,000 images (images/s over the
# whole loop: loader + forward + outputs; and the model alone). Medians and ratios are printed.
#
# The bar, what training's forward pass implies: train images/s divided by the forward pass's
# share of a training step. On the reference layers, measured with perf when it works here (one
# extra training epoch sampled with call graphs; the share of the forward functions: conv, BN,
# pooling, activations, input stage, against those of the backward pass and the update); on
# oneDNN (JIT kernels perf cannot name) and without perf, from the FLOP count: fastcnn's backward is 1.96 forwards (each conv/linear layer computes its
# weight gradient and, except the first, its input gradient, each a GEMM the forward's size),
# so the forward is 1/2.96 of a step. predict (eval-mode BN, no TTA) must reach at least
# train images/s / share (printed as the bar on the ratio: 1 / share).
#
# On a busy machine wall-clock rates mostly measure the scheduler: each round also prints the
# ratio of images per CPU-second (user + sys of the whole process, /usr/bin/time; training's
# final evaluation runs on a 50-image set so that it adds almost nothing), judged by the same bar.
#
# Usage: bench/predict_cpu.sh [ROUNDS]      (default 3; per path about 20 s a round on 2 busy
#        cores, plus one perf-sampled training epoch for the reference path: ~3-5 min in all)
# Environment: FL_BUILD=DIR (default: build), BATCH (both commands, default 128 = train's CPU
# default), THREADS (default: all cores), PATHS (CPU paths measured, each through
# FASTLOAD_CPU_BACKEND; default "reference onednn", a path the build lacks is skipped). Needs the packed dataset: samples/fashion-mnist/run.sh
# packs it (or this script packs it when the IDX files are there).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FL_BUILD:-$root/build}"
TF="$build/trainer/trainfast"
PD="$build/tools/packdata/packdata"
rounds="${1:-3}"
paths="${PATHS:-reference onednn}"
batch="${BATCH:-128}"
threads=()
[[ -n "${THREADS:-}" ]] && threads=(--threads "$THREADS")
fm="$root/samples/fashion-mnist"
data="$fm/packed/test"
[[ -x "$TF" ]] || { echo "predict_cpu.sh: $TF not built" >&2; exit 1; }
if [[ ! -f "$data/manifest.json" ]]; then
    [[ -s "$fm/data/t10k-images-idx3-ubyte.gz" ]] || "$fm/fetch.sh"
    "$PD" pack --idx "$fm/data/t10k-images-idx3-ubyte.gz" "$fm/data/t10k-labels-idx1-ubyte.gz" "$data" \
        --class-names "$fm/data/classes.txt" --compress zstd:19 --resume
fi
w="$(mktemp -d "${TMPDIR:-/tmp}/predict_cpu.XXXXXX")"
trap 'rm -rf "$w"' EXIT
# a 50-image validation set with Fashion-MNIST's classes: training's final evaluation then costs
# next to nothing in its CPU time (the checkpoint is the same)
"$build/tests/trainer/tf_make_dataset" "$w/tinyval" 50 28 28 1 10 1 "$(paste -sd, "$fm/data/classes.txt")" \
    > /dev/null || { echo "predict_cpu.sh: cannot make the small validation set" >&2; exit 1; }
# CPU seconds (user + sys) of the last timed command, from /usr/bin/time -o
cpu_s() { awk '{ print $2 + $3 }' "$1"; }
field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" <<< "$2"; }
# the forward pass's share of a training step, from perf call graphs (empty when perf cannot run)
forward_share() {
    command -v perf > /dev/null || return 0
    perf record -q -F 97 --call-graph dwarf,8192 -o "$w/perf.data" -- "$TF" train --data "$data" \
        --val "$w/tinyval" --model fastcnn --epochs 1 --batch "$batch" "${threads[@]}" --quiet \
        > /dev/null 2>&1 || return 0
    perf report -i "$w/perf.data" --children --sort symbol --stdio -g none 2> /dev/null | awk '
        $1 ~ /%$/ { pct = $1 + 0; name = $NF == "-" ? $(NF - 2) : $NF
            if (name ~ /^(conv_fwd_thread|bn_fwd_thread|maxpool_fwd_thread|avgpool_fwd_thread|cpu_relu_forward|cpu_gelu_forward|cpu_gap_forward|cpu_add_forward|cpu_linear_forward|input_thread)$/) f += pct
            else if (name ~ /^(conv_bwd_thread|reduce_thread|bn_bwd_thread|bn_grad_sums|maxpool_bwd_thread|avgpool_bwd_thread|cpu_relu_backward|cpu_gelu_backward|cpu_gap_backward|cpu_linear_backward|cpu_softmax_xent|cpu_sgd_step|cpu_ema_update)$/) b += pct }
        END { if (f > 0 && b > 0) printf "%.3f\n", f / (f + b) }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# one path: interleaved rounds of train then predict, the medians, the bar, a JSON line
measure() {
    local path=$1 r t p ti pi pm ra rc
    local train_v=() pred_v=() model_v=() ratio_v=() cpu_v=()
    export FASTLOAD_CPU_BACKEND=$path
    for r in $(seq 1 "$rounds"); do
        rm -rf "$w/ck"
        if ! t=$(/usr/bin/time -f "%e %U %S" -o "$w/train.time" "$TF" train --data "$data" --val "$w/tinyval" \
            --model fastcnn --epochs 1 --batch "$batch" --seed "$r" "${threads[@]}" --quiet --json \
            --checkpoint "$w/ck" 2> "$w/train.err" | tail -n 1); then
            grep -q "built without oneDNN" "$w/train.err" && { echo "$path: not in this build"; return 0; }
            cat "$w/train.err" >&2
            exit 1
        fi
        p=$(/usr/bin/time -f "%e %U %S" -o "$w/pred.time" "$TF" predict "$w/ck" "$data" --batch "$batch" \
            "${threads[@]}" --json --logits "$w/l.npy" 2> "$w/pred.err" | tail -n 1) \
            || { cat "$w/pred.err" >&2; exit 1; }
        ti=$(field images_per_sec "$t")
        pi=$(field images_per_sec "$p")
        pm=$(field compute_images_per_sec "$p")
        ra=$(awk -v a="$pi" -v b="$ti" 'BEGIN { printf "%.2f", a / b }')
        # the same 10,000 images each: images per CPU-second in ratio = train CPU s / predict CPU s
        rc=$(awk -v a="$(cpu_s "$w/train.time")" -v b="$(cpu_s "$w/pred.time")" 'BEGIN { printf "%.2f", a / b }')
        printf '%-10s %-6s %12.1f %14.1f %16.1f %8s %10s\n' "$path" "$r" "$ti" "$pi" "$pm" "$ra" "$rc"
        train_v+=("$ti") pred_v+=("$pi") model_v+=("$pm") ratio_v+=("$ra") cpu_v+=("$rc")
    done
    local mt mp mm mr mc share how bar verdict vcpu
    mt=$(median "${train_v[@]}") mp=$(median "${pred_v[@]}") mm=$(median "${model_v[@]}")
    mr=$(median "${ratio_v[@]}") mc=$(median "${cpu_v[@]}")
    printf '%-10s %-6s %12.1f %14.1f %16.1f %8s %10s\n' "$path" median "$mt" "$mp" "$mm" "$mr" "$mc"
    share=""
    # perf attributes time to the reference layers' functions; oneDNN's JIT kernels have no names
    [[ $path == reference ]] && share=$(forward_share)
    if [[ -n "$share" ]]; then
        how="perf"
    else
        share=$(awk 'BEGIN { printf "%.3f", 1 / 2.96 }')
        how="FLOP count"
    fi
    bar=$(awk -v s="$share" 'BEGIN { printf "%.2f", 1 / s }')
    verdict=$(awk -v r="$mr" -v b="$bar" 'BEGIN { print (r >= b) ? "meets" : "MISSES" }')
    vcpu=$(awk -v r="$mc" -v b="$bar" 'BEGIN { print (r >= b) ? "meets" : "MISSES" }')
    echo "$path: forward pass = $share of a training step ($how): training's forward implies" \
        "$(awk -v t="$mt" -v b="$bar" 'BEGIN { printf "%.0f", t * b }') images/s (${bar}x train);" \
        "predict / train ${mr}x wall ($verdict), ${mc}x per CPU-second ($vcpu) (medians of rounds)"
    printf '{"bench":"predict_cpu","cpu_backend":"%s","rounds":%s,"batch":%s,"train_images_per_sec":%s,"predict_images_per_sec":%s,"predict_model_images_per_sec":%s,"ratio":%s,"cpu_ratio":%s,"forward_share":%s,"share_from":"%s","bar":%s,"meets":%s,"cpu_meets":%s}\n' \
        "$path" "$rounds" "$batch" "$mt" "$mp" "$mm" "$mr" "$mc" "$share" "$how" "$bar" \
        "$([[ $verdict == meets ]] && echo true || echo false)" \
        "$([[ $vcpu == meets ]] && echo true || echo false)" >> "$w/results.jsonl"
}

echo "trainfast $("$TF" --version 2>&1 | head -1); $(nproc) cores; batch $batch; $rounds rounds; CPU paths: $paths"
printf '%-10s %-6s %12s %14s %16s %8s %10s\n' path round train_img/s predict_img/s predict_model/s ratio cpu_ratio
for path in $paths; do
    measure "$path"
done
cat "$w/results.jsonl" 2> /dev/null
