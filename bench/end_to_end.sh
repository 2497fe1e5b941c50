#!/usr/bin/env bash
# end_to_end.sh — the whole pipeline on one set of cores against its bound and its PyTorch peer.
# With L = the loader's images/s alone (fastload bench: JPEG decode + RRC + flip to SIZE, all
# cores) and C = the trainer's images/s alone on pre-decoded data (trainfast on the same photos
# packed raw at SIZE x SIZE, all cores), sharing the cores perfectly gives B = 1/(1/L + 1/C).
# Measured: trainfast training from the JPEG set with default options (its own loader decoding
# while its threads train; the decode workers at work chosen as it trains) and the PyTorch peer
# (bench/pytorch_train_loop.py: a DataLoader with --workers nproc processes decoding the photos
# with PIL + RandomResizedCrop + flip, feeding the same network and recipe; torch.set_num_threads
# left as PyTorch sets it). Each MODEL:SIZE:COUNT:EPOCHS of --models: COUNT photo-like JPEGs
# (bench/make_photos.py) packed --encode keep --jpeg-restart 4, batch 128 (trainfast's CPU
# default). --fixed "1 2" adds trainfast with --workers 1 and 2. Rounds are interleaved (the
# runs' order rotated from round to round); the summary gives medians, the ratios (targets:
# >= 0.95 of B, >= 3.5x PyTorch), images per CPU-second (each tool's own CPU seconds:
# trainfast's training steps, fastload bench's and the peer's process with its workers: on
# cores shared with other work the wall figures follow the share of the cores each run got,
# these do not), how trainfast split the cores between decode and compute (its --json) and the
# loads. Every run's JSON is kept in OUT/runs. --bf16 1 adds, in the same rounds, trainfast and C
# with --precision bf16 (bf16 convolutions, fp32 state: trainer/README.md, "Precision") and the
# peer under torch.autocast('cpu', bfloat16) (pytorch_train_loop.py --precision bf16), each
# compared with its fp32 self and with both peers.
# Usage: bench/end_to_end.sh [--runs R (3)] [--models "fastcnn:64:3000:1 resnet18:112:1536:1"]
#                            [--fixed "W..." ("")] [--bf16 0|1 (0)] [--build DIR] [--out DIR (/tmp/fastload-bench/end_to_end)]
#                            [--report-only 1 (the summary of the runs kept in OUT/runs)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=3 models="fastcnn:64:3000:1 resnet18:112:1536:1" fixed="" bf16=0 report_only=0 build="$root/build"
out="/tmp/fastload-bench/end_to_end"
me=end_to_end.sh
. "$root/bench/lib_bench.sh"
bench_options "runs models fixed bf16 report-only=report_only build out" "$@"
py=/usr/bin/python3
tf="$build/trainer/trainfast" pd="$build/tools/packdata/packdata" fl="$build/tools/fastload/fastload"
bench_need_built "$tf" "$pd" "$fl"
$py -c "import torch, torchvision" 2>/dev/null || { echo "$me: $py needs python3-torch and python3-torchvision" >&2; exit 1; }
mkdir -p "$out/runs"
ncores=$(nproc) batch=128

# the data of one MODEL:SIZE:COUNT:EPOCHS: photos (the peer's ImageFolder), their JPEG pack, the
# raw pack at SIZE (C) and a held-out slice for trainfast's --val
prepare() {
    local size=$1 count=$2 p="$out/photos-$2"
    [[ -d "$p" ]] || $py "$root/bench/make_photos.py" "$p" --count "$count" >/dev/null
    [[ -d "$out/jpg-$count" ]] || "$pd" pack "$p" "$out/jpg-$count" --encode keep --jpeg-restart 4 --quiet
    [[ -d "$out/raw$size-$count" ]] ||
        "$pd" pack "$p" "$out/raw$size-$count" --encode raw --resize "${size}x$size" --compress none --quiet
    [[ -d "$out/val$size-$count" ]] ||
        "$pd" pack "$p" "$out/val$size-$count" --encode raw --resize "${size}x$size" --compress none \
            --part 0/16 --quiet
}
# the last line of a run's output (its JSON) into OUT/runs/NAME.json; prints images_per_sec
keep() { tail -n 1 >"$out/runs/$1.json"; jget "$1" images_per_sec; }
jget() { $py -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$out/runs/$1.json" "$2"; }
train() { # NAME MODEL SIZE EPOCHS DATA VAL [trainfast options]
    local name=$1 model=$2 size=$3 epochs=$4 data=$5 val=$6
    shift 6
    "$tf" train --data "$data" --val "$val" --model "$model" --epochs "$epochs" --size "$size" \
        --device cpu --json --quiet "$@" 2>"$out/runs/$name.err" | keep "$name"
}
ratio() { echo "$1 / $2" | bc -l; }

((report_only)) || for spec in $models; do
    IFS=: read -r model size count epochs <<<"$spec"
    prepare "$size" "$count"
done
((report_only)) ||
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $ncores cores; models: $models; batch $batch; $runs rounds"
ips() { jget "$1" images_per_sec; }
cps() { # images per CPU-second of a run (trainfast: its training steps; fastload bench, PyTorch: theirs)
    echo "$(jget "$1" images) / $(jget "$1" cpu_seconds)" | bc -l
}
bound() { echo "1 / (1 / $1 + 1 / $2)" | bc -l; }
if ((!report_only)); then
    for ((r = 1; r <= runs; r++)); do
        for spec in $models; do
            IFS=: read -r model size count epochs <<<"$spec"
            k="$model$size-r$r" jpg="$out/jpg-$count" val="$out/val$size-$count"
            cut -d' ' -f1 /proc/loadavg >"$out/runs/$k-load.txt"
            # the runs of a round in a rotated order: each kind sits at another place each round,
            # so a load that drifts in step with the order does not favour one of them
            kinds=(L C trainfast pytorch)
            for w in $fixed; do kinds+=("workers$w"); done
            ((bf16)) && kinds+=(C16 trainfast16 pytorch16)
            n=${#kinds[@]}
            for ((i = 0; i < n; i++)); do
                kind=${kinds[$(((i + r - 1) % n))]}
                case $kind in
                    L) "$fl" bench "$jpg" --augment rrc,flip --size "$size" --batch "$batch" \
                           --workers "$ncores" --epochs "$epochs" --json | keep "$k-L" >/dev/null ;;
                    C) train "$k-C" "$model" "$size" "$epochs" "$out/raw$size-$count" "$val" >/dev/null ;;
                    trainfast) train "$k-trainfast" "$model" "$size" "$epochs" "$jpg" "$val" >/dev/null ;;
                    pytorch) $py "$root/bench/pytorch_train_loop.py" "$out/photos-$count" --model "$model" \
                                 --size "$size" --batch "$batch" --epochs "$epochs" --workers "$ncores" |
                                 keep "$k-pytorch" >/dev/null ;;
                    C16) train "$k-C16" "$model" "$size" "$epochs" "$out/raw$size-$count" "$val" \
                             --precision bf16 >/dev/null ;;
                    trainfast16) train "$k-trainfast16" "$model" "$size" "$epochs" "$jpg" "$val" \
                                     --precision bf16 >/dev/null ;;
                    pytorch16) $py "$root/bench/pytorch_train_loop.py" "$out/photos-$count" --model "$model" \
                                   --size "$size" --batch "$batch" --epochs "$epochs" --workers "$ncores" \
                                   --precision bf16 | keep "$k-pytorch16" >/dev/null ;;
                    workers*) train "$k-$kind" "$model" "$size" "$epochs" "$jpg" "$val" --workers "${kind#workers}" \
                                  >/dev/null ;;
                esac
            done
            L=$(ips "$k-L") C=$(ips "$k-C") D=$(ips "$k-trainfast") P=$(ips "$k-pytorch")
            B=$(bound "$L" "$C")
            line=$(printf '%s %s round %d (load %s): L %.0f  C %.1f  bound %.1f  trainfast %.1f (%.2f of bound, %s-%s workers)  PyTorch %.1f (x%.2f)' \
                "$model" "${size}px" "$r" "$(cat "$out/runs/$k-load.txt")" "$L" "$C" "$B" "$D" \
                "$(ratio "$D" "$B")" "$(jget "$k-trainfast" decode_workers_min)" \
                "$(jget "$k-trainfast" decode_workers_max)" "$P" "$(ratio "$D" "$P")")
            for w in $fixed; do
                W=$(ips "$k-workers$w")
                line+=$(printf '  --workers %s %.1f (%.2f)' "$w" "$W" "$(ratio "$W" "$B")")
            done
            if ((bf16)); then
                C16=$(ips "$k-C16") D16=$(ips "$k-trainfast16") P16=$(ips "$k-pytorch16")
                line+=$(printf '  | bf16: C %.1f  trainfast %.1f (x%.2f fp32)  PyTorch autocast %.1f (x%.2f; fp32 peer x%.2f)' \
                    "$C16" "$D16" "$(ratio "$D16" "$D")" "$P16" "$(ratio "$D16" "$P16")" "$(ratio "$D16" "$P")")
            fi
            echo "$line"
        done
    done
fi

# medians over the rounds of a figure (FN NAME-SUFFIX [KEY]) of one model
med() { # MODELSIZE FN SUFFIX [KEY]
    local i
    for ((i = 1; i <= runs; i++)); do $2 "$1-r$i-$3" ${4:+"$4"}; done | median
}
pct() { echo "100 * $1" | bc -l; }
echo
for spec in $models; do
    IFS=: read -r model size count epochs <<<"$spec"
    m="$model$size"
    L=$(med "$m" ips L) C=$(med "$m" ips C) D=$(med "$m" ips trainfast) P=$(med "$m" ips pytorch)
    B=$(bound "$L" "$C")
    Lc=$(med "$m" cps L) Cc=$(med "$m" cps C) Dc=$(med "$m" cps trainfast) Pc=$(med "$m" cps pytorch)
    Bc=$(bound "$Lc" "$Cc")
    loads=$(for ((i = 1; i <= runs; i++)); do cat "$out/runs/$m-r$i-load.txt"; done | sort -g | sed -n '1p;$p' | paste -sd-)
    printf '%s at %spx, %s photos, %s epoch(s), batch %s, medians of %s rounds (load %s):\n' \
        "$model" "$size" "$count" "$epochs" "$batch" "$runs" "$loads"
    printf '  L %.0f img/s, C %.1f img/s, bound 1/(1/L+1/C) %.1f img/s\n' "$L" "$C" "$B"
    printf '  trainfast from JPEG, default options: %.1f img/s = %.2f of the bound (target >= 0.95)\n' "$D" "$(ratio "$D" "$B")"
    printf '  PyTorch DataLoader (%s workers) + the same net (%s torch thread(s)): %.1f img/s; trainfast x%.2f (target >= 3.5)\n' \
        "$ncores" "$(jget "$m-r1-pytorch" threads)" "$P" "$(ratio "$D" "$P")"
    printf '  per CPU-second: L %.0f img, C %.1f, bound %.1f; trainfast %.1f = %.2f of it; PyTorch %.1f (trainfast x%.2f)\n' \
        "$Lc" "$Cc" "$Bc" "$Dc" "$(ratio "$Dc" "$Bc")" "$Pc" "$(ratio "$Dc" "$Pc")"
    printf '  trainfast core split: %s cores, %s compute threads, decode workers %.2f at work on average (%s-%s of %s started); while training, decode %.1f%% and compute %.1f%% of the cores'"'"' time (CPU seconds; the rest: other processes, idle)\n' \
        "$(jget "$m-r1-trainfast" cores)" "$(jget "$m-r1-trainfast" compute_threads)" \
        "$(med "$m" jget trainfast decode_workers_mean)" "$(med "$m" jget trainfast decode_workers_min)" \
        "$(med "$m" jget trainfast decode_workers_max)" "$(jget "$m-r1-trainfast" decode_workers_started)" \
        "$(pct "$(med "$m" jget trainfast decode_core_fraction)")" "$(pct "$(med "$m" jget trainfast compute_core_fraction)")"
    if ((bf16)); then
        C16=$(med "$m" ips C16) D16=$(med "$m" ips trainfast16) P16=$(med "$m" ips pytorch16)
        C16c=$(med "$m" cps C16) D16c=$(med "$m" cps trainfast16) P16c=$(med "$m" cps pytorch16)
        printf '  bf16: C %.1f img/s (x%.2f fp32 C), trainfast from JPEG %.1f img/s (x%.2f fp32); PyTorch autocast bf16 %.1f img/s (x%.2f its fp32)\n' \
            "$C16" "$(ratio "$C16" "$C")" "$D16" "$(ratio "$D16" "$D")" "$P16" "$(ratio "$P16" "$P")"
        printf '  bf16 against the peers: trainfast bf16 x%.2f PyTorch fp32, x%.2f PyTorch autocast bf16 (target >= 3.5)\n' \
            "$(ratio "$D16" "$P")" "$(ratio "$D16" "$P16")"
        printf '  bf16 per CPU-second: C %.1f (x%.2f fp32), trainfast %.1f (x%.2f fp32); PyTorch autocast %.1f; trainfast bf16 x%.2f PyTorch fp32, x%.2f PyTorch bf16\n' \
            "$C16c" "$(ratio "$C16c" "$Cc")" "$D16c" "$(ratio "$D16c" "$Dc")" "$P16c" "$(ratio "$D16c" "$Pc")" "$(ratio "$D16c" "$P16c")"
    fi
    for w in $fixed; do
        W=$(med "$m" ips "workers$w") Wc=$(med "$m" cps "workers$w")
        printf '  trainfast --workers %s: %.1f img/s = %.2f of the bound; %.1f img per CPU-second = %.2f of it\n' \
            "$w" "$W" "$(ratio "$W" "$B")" "$Wc" "$(ratio "$Wc" "$Bc")"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
