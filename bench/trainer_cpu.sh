#!/usr/bin/env bash
# trainer_cpu.sh — trainfast's CPU training speed beside PyTorch's on the same network and recipe
#, interleaved in one run so both see the same machine:
#   (a) fastcnn on Fashion-MNIST (60,000 train / 10,000 test images, 28x28x1): width 24, batch 128,
#       2 epochs, SGD Nesterov 0.9 lr 0.2, wd 5e-4 (not on BN/bias), label smoothing 0.1, warm-up
#       0.5 epoch then linear decay, random flip, flip TTA at the test — trainfast's defaults
#       (trainer/train/train.c, models.c), given explicitly; images/s of the training steps and test top-1;
#   (b) resnet18 at 64 px on the photo set (bench/make_photos.py, 2,000 photos packed as raw
#       64x64x3), one epoch, lr 0.05, flip: images/s only.
# The peer is bench/pytorch_fmnist.py --device cpu (Debian's python3-torch, oneDNN, fp32, NCHW,
# torch.set_num_threads = cores, the whole dataset preloaded in RAM as uint8, the same model layer
# for layer, the same init distribution, schedule and full-batches-only epochs). trainfast runs
# with each --cpu-backend its `train --help` offers (reference, onednn), else its only CPU path.
# trainfast's images/s is its JSON images_per_sec (training steps incl. waiting for data, not the
# evaluations); its cores used are (user+sys)/wall of the whole process (/usr/bin/time).
# PyTorch's images/s: all epochs' training steps incl. augmentation; cores: same formula over them.
#
# Usage: bench/trainer_cpu.sh [--build DIR] [--runs N] [--threads T] [--quick]
#   --runs N     runs of every figure, interleaved (default 3); the table shows medians
#   --quick      1 run, fastcnn 1 epoch on 12,000 images, resnet18 on 512 photos (a smoke run)
# Takes about 8 minutes on 2 quiet cores with --runs 3 (estimated; --quick: about 1.5); measured at
# load 13-16 on 2 shared cores: --quick 6.6 minutes.
# Output: the table on stdout, bench/out/trainer_cpu/summary.json, every run's log there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
me=trainer_cpu.sh
build="$root/build" runs=3 quick=0 threads="$(nproc)"
. "$here/lib_bench.sh"
bench_options "build runs threads quick:1" "$@"
((quick)) && runs=1 # --quick: one run
build=$(realpath -m "$build")
PY=/usr/bin/python3
TF="$build/trainer/trainfast" PD="$build/tools/packdata/packdata"
bench_need_built "$TF" "$PD"
$PY -c "import torch" 2> /dev/null || { echo "trainer_cpu.sh: $PY has no torch (apt-get install python3-torch)" >&2; exit 1; }
out="$root/bench/out/trainer_cpu" fm="$root/samples/fashion-mnist"
mkdir -p "$out"
export FASTLOAD_LIBRARY="${FASTLOAD_LIBRARY:-$build/libfastload.so}" # the peer reads the packed data once

# ---- data -------------------------------------------------------------------------------------
bench_fashion_mnist "$PD"
fm_train="$fm/packed/train" fm_epochs=2
if ((quick)); then # the first 12,000 training images (classes interleaved: 1,200 each)
    fm_train="$out/fmnist-12k" fm_epochs=1
    [[ -f "$fm_train/manifest.json" ]] ||
        "$PD" pack --idx "$fm/data/train-images-idx3-ubyte.gz" "$fm/data/train-labels-idx1-ubyte.gz" \
            "$fm_train" --class-names "$fm/data/classes.txt" --part 0/5 --compress none --quiet
fi
count=2000
((quick)) && count=512
photos="$out/photos-$count"
if [[ ! -d "$photos" ]]; then
    rm -rf "$photos.tmp"
    $PY "$root/bench/make_photos.py" "$photos.tmp" --count "$count" --mean-pixels 140000 > /dev/null
    mv "$photos.tmp" "$photos"
fi
p64="$out/photos64-$count" p64val="$out/photos64-$count-val"
[[ -d "$p64" ]] || "$PD" pack "$photos" "$p64" --encode raw --resize 64x64 --compress none --quiet
[[ -d "$p64val" ]] || "$PD" pack "$photos" "$p64val" --encode raw --resize 64x64 --compress none \
    --part 0/16 --quiet

# --cpu-backend when this trainfast has it: reference always, onednn when linked against oneDNN
backends=(default)
help=$("$TF" train --help) # (not piped into grep -q: under pipefail its SIGPIPE would fail the test)
if grep -q -- "--cpu-backend" <<< "$help"; then
    backends=(reference)
    grep -q libdnnl <<< "$(ldd "$TF")" && backends+=(onednn)
fi

# ---- runs, interleaved --------------------------------------------------------------------------
# tf NAME [options]: trainfast; its JSON summary plus "cores_used" in $out/NAME.json
tf() {
    local name=$1
    shift
    local be=()
    [[ $BE != default ]] && be=(--cpu-backend "$BE")
    if ! /usr/bin/time -f "%e %U %S" -o "$out/$name.time" "$TF" train --device cpu --threads "$threads" \
            "${be[@]}" --json --quiet "$@" > "$out/$name.out" 2> "$out/$name.err"; then
        echo "trainer_cpu.sh: $name failed:" >&2; tail -3 "$out/$name.err" >&2; exit 1
    fi
    read -r wall user sys < <(tail -n 1 "$out/$name.time")
    tail -n 1 "$out/$name.out" | sed "s/}\$/,\"cores_used\":$(awk -v w="$wall" -v u="$user" -v s="$sys" \
        'BEGIN { printf "%.3f", (u + s) / w }'),\"process_wall\":$wall}/" > "$out/$name.json"
}
# pt NAME [options]: the PyTorch peer, its JSON in $out/NAME.json
pt() {
    local name=$1
    shift
    if ! $PY "$root/bench/pytorch_fmnist.py" --device cpu --threads "$threads" --json "$@" \
            > "$out/$name.out" 2> "$out/$name.err"; then
        echo "trainer_cpu.sh: $name failed:" >&2; tail -3 "$out/$name.err" >&2; exit 1
    fi
    tail -n 1 "$out/$name.out" > "$out/$name.json"
    if grep -q '"data_source": "synthetic"' "$out/$name.json"; then
        echo "trainer_cpu.sh: $name: the peer read no dataset ($(head -2 "$out/$name.err")); build the" \
            "shared library (FASTLOAD_LIBRARY=$FASTLOAD_LIBRARY)" >&2
        exit 1
    fi
}
fm_common=(--data "$fm_train" --val "$fm/packed/test" --model fastcnn --width 24 --batch 128
           --epochs "$fm_epochs" --lr 0.2 --wd 5e-4 --momentum 0.9 --label-smoothing 0.1 --warmup 0.5)
r18_common=(--data "$p64" --val "$p64val" --model resnet18 --batch 128 --epochs 1 --lr 0.05
            --wd 5e-4 --momentum 0.9 --label-smoothing 0.1 --warmup 0.5)
rm -f "$out"/run*-*.json
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "trainer_cpu.sh: $(nproc) cores, $threads threads, runs $runs, trainfast backends: ${backends[*]}; load $load0" >&2
t_all=$SECONDS
for ((i = 1; i <= runs; i++)); do
    for BE in "${backends[@]}"; do
        tf "run$i-tf-fastcnn-$BE" "${fm_common[@]}" --schedule linear
        echo "  run $i trainfast fastcnn ($BE): $(grep -o '"val_top1":[0-9.]*\|"images_per_sec":[0-9.]*\|"cores_used":[0-9.]*' \
            "$out/run$i-tf-fastcnn-$BE.json" | tr '\n' ' ')" >&2
    done
    pt "run$i-pt-fastcnn" "${fm_common[@]}" --idx "$fm/data" --crop-pad 0
    echo "  run $i pytorch fastcnn: $(grep -o '"val_top1": [0-9.]*\|"images_per_sec_all_epochs": [0-9.]*\|"cores_used": [0-9.]*' \
        "$out/run$i-pt-fastcnn.json" | tr '\n' ' ')" >&2
    for BE in "${backends[@]}"; do
        tf "run$i-tf-resnet18-$BE" "${r18_common[@]}" --no-tta
        echo "  run $i trainfast resnet18 ($BE): $(grep -o '"images_per_sec":[0-9.]*' "$out/run$i-tf-resnet18-$BE.json")" >&2
    done
    pt "run$i-pt-resnet18" "${r18_common[@]}" --crop-pad 0 --no-eval
    echo "  run $i pytorch resnet18: $(grep -o '"images_per_sec_all_epochs": [0-9.]*' "$out/run$i-pt-resnet18.json")" >&2
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

$PY - "$out" "$runs" "$load0" "$load1" "$((SECONDS - t_all))" "${backends[@]}" <<'EOF'
import json, statistics, sys
out, runs, load0, load1, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
backends = sys.argv[6:]
def load(name):
    return [json.load(open(f"{out}/run{i}-{name}.json")) for i in range(1, runs + 1)]
med = statistics.median
res, rows = {}, []
pt_fm, pt_r18 = load("pt-fastcnn"), load("pt-resnet18")
pf_ips = med(r["images_per_sec_all_epochs"] for r in pt_fm)
pf_top = med(r["val_top1"] for r in pt_fm)
pr_ips = med(r["images_per_sec_all_epochs"] for r in pt_r18)
res["pytorch"] = {"fastcnn_images_per_sec": pf_ips, "fastcnn_top1": pf_top,
                  "fastcnn_cores_used": med(r["cores_used"] for r in pt_fm),
                  "resnet18_images_per_sec": pr_ips, "torch": pt_fm[0]["torch"]}
print(f"{'':<30} {'img/s':>8} {'top-1':>7} {'cores':>6} {'x PyTorch':>10}  target")
print(f"{'PyTorch fastcnn':<30} {pf_ips:>8.0f} {100 * pf_top:>6.2f}% {res['pytorch']['fastcnn_cores_used']:>6.2f}")
for be in backends:
    fm, r18 = load(f"tf-fastcnn-{be}"), load(f"tf-resnet18-{be}")
    ips, top = med(r["images_per_sec"] for r in fm), med(r["val_top1"] for r in fm)
    cores = med(r["cores_used"] for r in fm)
    rips = med(r["images_per_sec"] for r in r18)
    ok_fm = ips / pf_ips >= 1.2 and abs(top - pf_top) <= 0.003
    ok_r18 = rips / pr_ips >= 1.0
    res[be] = {"fastcnn_images_per_sec": ips, "fastcnn_top1": top, "fastcnn_cores_used": cores,
               "fastcnn_ratio": ips / pf_ips, "fastcnn_top1_diff_points": 100 * (top - pf_top),
               "resnet18_images_per_sec": rips, "resnet18_ratio": rips / pr_ips,
               "resnet18_cores_used": med(r["cores_used"] for r in r18),
               "fastcnn_pass": ok_fm, "resnet18_pass": ok_r18}
    print(f"{'trainfast fastcnn (' + be + ')':<30} {ips:>8.0f} {100 * top:>6.2f}% {cores:>6.2f} "
          f"{ips / pf_ips:>9.2f}x  >= 1.2x, top-1 within 0.3: {'PASS' if ok_fm else 'MISS'} "
          f"({100 * (top - pf_top):+.2f} points)")
print(f"{'PyTorch resnet18 64 px':<30} {pr_ips:>8.0f}")
for be in backends:
    r = res[be]
    print(f"{'trainfast resnet18 (' + be + ')':<30} {r['resnet18_images_per_sec']:>8.0f} {'':>7} "
          f"{r['resnet18_cores_used']:>6.2f} {r['resnet18_ratio']:>9.2f}x  >= 1.0x: "
          f"{'PASS' if r['resnet18_pass'] else 'MISS'}")
print(f"medians of {runs} interleaved run(s); load average before {load0}, after {load1}; {secs} s")
res.update(runs=runs, load_before=load0, load_after=load1, seconds=int(secs))
json.dump(res, open(f"{out}/summary.json", "w"), indent=1)
EOF
