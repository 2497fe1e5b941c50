#!/usr/bin/env bash
# loader.sh — libfastload throughput beside its peers and physical limits, measured in the same run
# (each figure: median of --runs runs of the tool's own JSON rate):
#   (a) `fastload bench`: random-resized-crop 224 + flip, batch 256, 2 workers, on photo-like JPEGs
#       (~400x350 average, cut from real photographs by bench/make_photos.py, packed --encode keep
#       --jpeg-restart 4: a lossless rewrite, so every decoded pixel equals the original file's),
#       and the same JPEGs packed plain --encode keep (the files as they are);
#   (b) the naive limit: single-core stock libjpeg-turbo (its own Huffman decoder) full-size
#       decode rate of the same files x 2;
#   (c) PyTorch DataLoader + torchvision ImageFolder + PIL, same augmentation, num_workers=2;
#   raw uint8 records (64x64x3 cut from the photos; Fashion-MNIST, 784-byte records packed
#   --compress none, when samples/fashion-mnist/data exists — run samples/fashion-mnist/run.sh
#   once): fastload MB/s of batch bytes delivered (runs of about a second) vs single-thread memcpy
#   bandwidth; Fashion-MNIST as the sample packs it (zstd 19) is shown beside them without a target;
#   the Python binding (bench/loader_python.py) vs `fastload bench` on the same data.
# Targets: (a) restart-marked >= 5x (c) and >= 1.7x (b), plain keep >= 6x (c), raw >= 40% of
# memcpy, binding within 10%.
# Data is read from the page cache (buffered I/O; the files fit in RAM). Every rate covers the whole
# run, start-up included (loader creation, worker processes); 10 epochs by default, so one-time
# costs weigh as they do in a training run rather than dominating a 1-second measurement.
# Usage: bench/loader.sh [--count N (2000)] [--runs R (3)] [--epochs E (10)] [--build DIR]
#                        [--quick] [--no-setup] [--out DIR (bench/out/loader)]
#   --quick: a smoke run (200 images, 1 run, 1 epoch; the PyTorch peer only if torch is installed)
#   --no-setup: do not apt-get install python3-skimage python3-torch python3-torchvision
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
count=2000 runs=3 epochs=10 build="$root/build" quick=0 setup=1 out="$root/bench/out/loader"
while (($#)); do
    case "$1" in
        --count) count=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --epochs) epochs=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --out) out=$2; shift 2 ;;
        --no-setup) setup=0; shift ;;
        -h|--help) sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "loader.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
done
if ((quick)); then
    count=200 runs=1 epochs=1 setup=0
fi
py=/usr/bin/python3

setup_packages() { # the photographs and the PyTorch peer come from Debian packages
    local missing=()
    for p in python3-skimage python3-torch python3-torchvision python3-pil python3-numpy; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    echo "loader.sh: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
((setup)) && setup_packages

fastload="$build/tools/fastload/fastload"
packdata="$build/tools/packdata/packdata"
decbench="$(find "$build" -name fl_decode_bench -type f -perm -u+x 2>/dev/null | head -1)"
[[ -x "$fastload" ]] || { echo "loader.sh: $fastload not built (run scripts/setup.sh)" >&2; exit 1; }
[[ -x "$packdata" ]] || { echo "loader.sh: $packdata not built" >&2; exit 1; }
$py -c "import numpy, PIL" 2>/dev/null || { echo "loader.sh: needs python3-numpy and python3-pil" >&2; exit 1; }
have_torch=0
$py -c "import torch, torchvision" 2>/dev/null && have_torch=1
export FASTLOAD_LIBRARY="$build/libfastload.so"

mkdir -p "$out"
photos="$out/photos-400x350-$count"
if [[ ! -d "$photos" ]]; then # made under a temporary name: an interrupted run leaves no half folder
    rm -rf "$photos.tmp"
    $py "$root/bench/make_photos.py" "$photos.tmp" --count "$count" --mean-pixels 140000
    mv "$photos.tmp" "$photos"
fi
jpeg="$out/jpeg-keep-rst4-$count"
[[ -d "$jpeg" ]] || "$packdata" pack "$photos" "$jpeg" --encode keep --jpeg-restart 4 --quiet
plain="$out/jpeg-keep-$count"
[[ -d "$plain" ]] || "$packdata" pack "$photos" "$plain" --encode keep --quiet
raw="$out/raw64-$count"
[[ -d "$raw" ]] || "$packdata" pack "$photos" "$raw" --encode raw --resize 64x64 --compress none --quiet
fmnist="$root/samples/fashion-mnist/packed/train"
fmdata="$root/samples/fashion-mnist/data"
fmraw="$out/fmnist-raw"
if [[ ! -d "$fmraw" && -f "$fmdata/train-images-idx3-ubyte.gz" ]]; then
    "$packdata" pack --idx "$fmdata/train-images-idx3-ubyte.gz" "$fmdata/train-labels-idx1-ubyte.gz" \
        "$fmraw.tmp" --compress none --quiet && mv "$fmraw.tmp" "$fmraw"
fi
mapfile -t files < <(find "$photos" -name '*.jpg' | sort)
echo "loader bench: ${#files[@]} JPEGs ($(du -sh "$photos" | cut -f1)), $(nproc) cores, runs=$runs, epochs=$epochs"

# Runs are interleaved (run 1 of every figure, then run 2, ...) so that a figure and its peer see
# the same machine conditions; each figure is the median of its runs. Every run's JSON is kept.
one() { # name key run command...
    local name=$1 key=$2 i=$3; shift 3
    "$@" >"$out/$name.$i.json"
    $py -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$out/$name.$i.json" "$key" \
        >>"$out/$name.vals"
}
rm -f "$out"/*.vals
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
aug=(--batch 256 --workers 2 --size 224 --augment rrc,flip --order random)
# raw runs of about a second each: 64x64x3 (24 MB an epoch) 400 epochs, Fashion-MNIST (47 MB) 200
raw_epochs=$((quick ? 2 : 200)) raw64_epochs=$((quick ? 2 : 400))
if [[ -z "$decbench" ]]; then echo "loader.sh: fl_decode_bench not built: naive limit skipped" >&2; fi
((have_torch)) || echo "loader.sh: torch/torchvision not importable by $py: PyTorch peer skipped" >&2
for ((i = 0; i < runs; i++)); do
    # (a) fastload, and the Python binding on the same data and options
    one fastload-jpeg images_per_sec "$i" "$fastload" bench "$jpeg" "${aug[@]}" --epochs "$epochs" --json
    $py -c "import json,sys; print(json.load(open(sys.argv[1]))['images_per_cpu_sec'])" \
        "$out/fastload-jpeg.$i.json" >>"$out/fastload-jpeg-cpu.vals"
    one fastload-plain images_per_sec "$i" "$fastload" bench "$plain" "${aug[@]}" --epochs "$epochs" --json
    $py -c "import json,sys; print(json.load(open(sys.argv[1]))['images_per_cpu_sec'])" \
        "$out/fastload-plain.$i.json" >>"$out/fastload-plain-cpu.vals"
    one python-jpeg images_per_sec "$i" $py "$root/bench/loader_python.py" "$jpeg" --batch 256 --workers 2 \
        --size 224 --augment rrc,flip --order random --epochs "$epochs"
    $py -c "import json,sys; print(json.load(open(sys.argv[1]))['images_per_cpu_sec'])" \
        "$out/python-jpeg.$i.json" >>"$out/python-jpeg-cpu.vals"
    # (b) naive limit: 1-core full-size decode of the same files (x 2 cores below)
    if [[ -n "$decbench" ]]; then
        one decode-1core full_decode_per_sec "$i" taskset -c 0 "$decbench" --json "${files[@]}"
        $py -c "import json,sys; print(json.load(open(sys.argv[1]))['full_decode_per_cpu_sec'])" \
            "$out/decode-1core.$i.json" >>"$out/decode-1core-cpu.vals"
    fi
    # (c) PyTorch DataLoader
    if ((have_torch)); then
        one pytorch-dataloader images_per_sec "$i" $py "$root/bench/pytorch_dataloader.py" \
            "$photos" --workers 2 --batch 256 --size 224 --epochs "$epochs"
        $py -c "import json,sys; print(json.load(open(sys.argv[1]))['images_per_cpu_sec'])" \
            "$out/pytorch-dataloader.$i.json" >>"$out/pytorch-dataloader-cpu.vals"
    fi
    # raw records vs single-thread memcpy, and the binding on them
    one memcpy memcpy_mb_per_sec "$i" "$fastload" bench --memcpy --json
    one fastload-raw64 mb_per_sec "$i" "$fastload" bench "$raw" --batch 256 --workers 2 --order random \
        --epochs "$raw64_epochs" --json
    one python-raw64 mb_per_sec "$i" $py "$root/bench/loader_python.py" "$raw" --batch 256 --workers 2 \
        --order random --epochs "$raw64_epochs"
    [[ ! -d "$fmraw" ]] || one fastload-fmnist-raw mb_per_sec "$i" "$fastload" bench "$fmraw" --batch 256 \
        --workers 2 --order random --epochs "$raw_epochs" --json
    [[ ! -d "$fmnist" ]] || one fastload-fmnist mb_per_sec "$i" "$fastload" bench "$fmnist" --batch 256 \
        --workers 2 --order random --epochs $((quick ? 1 : 5)) --json
done
echo "machine load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
((quick)) && echo "(--quick: a smoke run; start-up dominates such short runs, the ratios below mean little)"

$py - "$out" <<'PY'
import json, math, os, statistics, sys
out = sys.argv[1]

def series(name, scale=1.0):
    p = os.path.join(out, name + ".vals")
    vals = [float(x) * scale for x in open(p).read().split()] if os.path.exists(p) else []
    return (statistics.median(vals), max(vals)) if vals else (math.nan, math.nan)

rows = [  # figure, series, unit, peer, peer series, target ratio
    ("fastload JPEG rrc224+flip, 2 workers", "fastload-jpeg", "img/s", "PyTorch DataLoader (2 workers)", "pytorch-dataloader", 5.0),
    # per CPU-second (CPU time of every thread/process of each side): holds when the machine is busy
    ("  same, per CPU-second", "fastload-jpeg-cpu", "img/s", "PyTorch DataLoader per CPU-s", "pytorch-dataloader-cpu", 5.0),
    ("fastload JPEG rrc224+flip, 2 workers", "fastload-jpeg", "img/s", "2 x 1-core full decode", ("decode-1core", 2.0), 1.7),
    ("  same, per CPU-second", "fastload-jpeg-cpu", "img/s", "1-core full decode per CPU-s", "decode-1core-cpu", 1.7),
    ("fastload plain keep JPEG, 2 workers", "fastload-plain", "img/s", "PyTorch DataLoader (2 workers)", "pytorch-dataloader", 6.0),
    ("  same, per CPU-second", "fastload-plain-cpu", "img/s", "PyTorch DataLoader per CPU-s", "pytorch-dataloader-cpu", 6.0),
    ("fastload plain keep JPEG, 2 workers", "fastload-plain", "img/s", "2 x 1-core full decode", ("decode-1core", 2.0), None),
    ("fastload raw 64x64x3, 2 workers", "fastload-raw64", "MB/s", "1-thread memcpy", "memcpy", 0.4),
    ("fastload Fashion-MNIST raw, 2 workers", "fastload-fmnist-raw", "MB/s", "1-thread memcpy", "memcpy", 0.4),
    ("fastload Fashion-MNIST zstd (shown)", "fastload-fmnist", "MB/s", "1-thread memcpy", "memcpy", None),
    ("python binding JPEG rrc224+flip", "python-jpeg", "img/s", "fastload bench (same)", "fastload-jpeg", 0.9),
    ("  same, per CPU-second", "python-jpeg-cpu", "img/s", "fastload bench per CPU-s", "fastload-jpeg-cpu", 0.9),
    ("python binding raw 64x64x3", "python-raw64", "MB/s", "fastload bench (same)", "fastload-raw64", 0.9),
]
print(f"{'figure':38} {'value':>8} {'unit':5}  {'peer':31} {'peer':>8} {'ratio':>7} {'target':>7}        {'best/best':>9}")
summary = []
for name, sname, unit, peer, pname, target in rows:
    v, vb = series(sname)
    pv, pvb = series(*pname) if isinstance(pname, tuple) else series(pname)
    if math.isnan(v) or math.isnan(pv) or pv == 0:
        print(f"{name:38} {v:8.0f} {unit:5}  {peer:31} {'n/a':>8}")
        summary.append(dict(figure=name, value=None if math.isnan(v) else v, peer=peer, verdict="n/a"))
        continue
    r, rb = v / pv, vb / pvb
    verdict = "    " if target is None else "PASS" if r >= target else "MISS"
    tgt = "-" if target is None else ">=%gx" % target
    print(f"{name:38} {v:8.0f} {unit:5}  {peer:31} {pv:8.0f} {r:6.2f}x {tgt:>7} {verdict}  {rb:8.2f}x")
    summary.append(dict(figure=name, value=v, unit=unit, peer=peer, peer_value=pv, ratio=r, target=target,
                        verdict=verdict, best_value=vb, best_peer_value=pvb, best_ratio=rb))
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print("(value/peer: medians of the runs' own rates, PASS/MISS judged on them; best/best: ratio of the best")
print(" runs; per CPU-second rows divide by the CPU time of every thread and worker process of each side;")
print(" data in the page cache; per-run JSON under " + out + ")")
PY
