#!/usr/bin/env bash
# ffcv_peer.sh — fastload's loader and writer beside FFCV 1.0.2 (libffcv/ffcv at commit 3a12966,
# 2024-05-06; ffcv.__version__ 1.0.2, its setup.py 1.0.1) on the same photos, same work, same cores:
#   writer: FFCV's DatasetWriter (RGBImageField write_mode='jpg', quality 90: every photo decoded
#           by PIL and re-encoded by OpenCV) vs packdata on the same ImageFolder, both --workers W:
#           (w1) `--encode keep --jpeg-restart 4`, the set the loader rows read (each file's own
#                bytes with restart markers added losslessly: same pixels as the photo);
#           (w2) `--encode jpeg --quality 90`, the same work as FFCV's (decode + re-encode at 90);
#           (w3) `--encode keep` (bytes as they are), shown without a target.
#   loader: RandomResizedCrop 224 (scale 0.08-1, ratio 3/4-4/3) + horizontal flip, batch 256,
#           random order, W decode threads, uint8 NHWC batches in memory (no GPU, no ToTensor):
#           `fastload bench` on (w1)'s set vs FFCV's Loader on its own .beton (bench/ffcv_peer.py).
#           Each run is E epochs in one process; the first epoch (loader creation and, for FFCV,
#           Numba's JIT in that process) and the steady epochs 2..E are reported apart.
# Per CPU-second: CPU time (rusage) of every thread and child process of each side, read at
# epoch boundaries by both (fastload bench's cpu_seconds_per_epoch). "cores used" = CPU seconds
# per wall second: on a machine shared with other work the wall ratio is the per-CPU ratio
# times the ratio of the shares each side got.
# Runs are interleaved (FFCV, then fastload, per round); figures are medians of --runs rounds.
# Data in the page cache. Targets: steady loader and writer (w1) >= 4x FFCV, wall and per CPU-s.
# The peer: FFCV built from source into a venv under --peer (default /var/tmp/fl-ffcv), once:
#   bench/ffcv_peer.sh --install-peer --ffcv-src SRC   (SRC: FFCV's source tree at commit
#   3a12966, or a git directory holding that commit, e.g. a bare clone of libffcv/ffcv)
# It apt-get installs python3-numba python3-opencv libopencv-dev libturbojpeg0-dev python3-torch
# python3-torchvision python3-tqdm python3-terminaltables python3-psutil (and python3-skimage for
# the photographs), makes a venv with
# --system-site-packages and pip-installs the source with --no-deps --no-index (offline; no patch).
# Without the peer the script says so and exits 77 (skip).
# Usage: bench/ffcv_peer.sh [--count N (2000)] [--runs R (3)] [--epochs E (6)] [--workers W (2)]
#                           [--build DIR] [--out DIR (bench/out/ffcv)] [--peer DIR]
#                           [--install-peer] [--ffcv-src SRC] [--quick]
#   --quick: a smoke run (200 images, 1 round, 2 epochs)
set -euo pipefail
me=ffcv_peer.sh
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
count=2000 runs=3 epochs=6 workers=2 build="$root/build" out="$root/bench/out/ffcv" peer=/var/tmp/fl-ffcv
install=0 quick=0 ffcv_src="" ffcv_commit=3a12966
source "$root/bench/lib_bench.sh"
bench_options "count runs epochs workers build out peer ffcv-src=ffcv_src install-peer=install:1 quick:1" "$@"
((quick)) && count=200 runs=1 epochs=2
build=$(realpath -m "$build") out=$(realpath -m "$out") peer=$(realpath -m "$peer") # the helper runs in /tmp
((epochs >= 2)) || { echo "$me: --epochs must be >= 2 (the first epoch is reported apart)" >&2; exit 2; }
py=/usr/bin/python3
venv="$peer/venv"

install_peer() {
    local src="$peer/src" sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    echo "$me: installing FFCV's dependencies from Debian"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-numba python3-opencv \
        libopencv-dev libturbojpeg0-dev python3-torch python3-torchvision python3-tqdm \
        python3-terminaltables python3-psutil python3-skimage >/dev/null
    [[ -n $ffcv_src ]] || { echo "$me: --install-peer needs --ffcv-src (FFCV's source tree or a git directory)" >&2; exit 2; }
    rm -rf "$src"
    mkdir -p "$src"
    if [[ -f $ffcv_src/setup.py ]]; then
        cp -a "$ffcv_src/." "$src/"
    elif git --git-dir="$ffcv_src" rev-parse -q --verify "$ffcv_commit^{commit}" >/dev/null 2>&1; then
        git --git-dir="$ffcv_src" archive "$ffcv_commit" | tar -x -C "$src"
    elif git -C "$ffcv_src" rev-parse -q --verify "$ffcv_commit^{commit}" >/dev/null 2>&1; then
        git -C "$ffcv_src" archive "$ffcv_commit" | tar -x -C "$src"
    else
        echo "$me: $ffcv_src is neither FFCV's source tree nor a git directory holding commit $ffcv_commit" >&2
        exit 1
    fi
    rm -rf "$venv"
    $py -m venv --system-site-packages "$venv"
    # run from outside the source tree: there, 'import ffcv' would find the unbuilt package
    (cd /tmp && "$venv/bin/pip" install -q --no-deps --no-build-isolation --no-index "$src")
    echo "$me: FFCV installed in $venv"
}
((install)) && install_peer

if ! (cd /tmp && "$venv/bin/python" -c "import ffcv, numba, cv2, torchvision") 2>/dev/null; then
    echo "$me: FFCV peer not installed under $peer (skipped). Install it once with" >&2
    echo "  bench/ffcv_peer.sh --install-peer --ffcv-src SRC" >&2
    echo "  (SRC: FFCV's source at commit $ffcv_commit, or a git directory holding that commit)" >&2
    exit 77
fi
fastload="$build/tools/fastload/fastload" packdata="$build/tools/packdata/packdata"
bench_need_built "$fastload" "$packdata"
$py -c "import PIL, numpy" 2>/dev/null || { echo "$me: needs python3-pil and python3-numpy" >&2; exit 1; }
helper="$root/bench/ffcv_peer.py"
fpy() { (cd /tmp && "$venv/bin/python" "$helper" "$@"); } # FFCV's python, away from any ffcv/ folder

mkdir -p "$out"
photos="$out/photos-400x350-$count"
if [[ ! -d "$photos" ]]; then # made under a temporary name: an interrupted run leaves no half folder
    rm -rf "$photos.tmp"
    $py "$root/bench/make_photos.py" "$photos.tmp" --count "$count" --mean-pixels 140000
    mv "$photos.tmp" "$photos"
fi
# the loader's inputs, written once: packdata's (w1) set and FFCV's .beton
flset="$out/keep-rst4-$count" beton="$out/ffcv-jpg90-$count.beton"
[[ -d "$flset" ]] || "$packdata" pack "$photos" "$flset" --encode keep --jpeg-restart 4 --workers "$workers" --quiet
[[ -f "$beton" ]] || fpy write "$photos" "$beton" --workers "$workers" >/dev/null 2>&1
echo "ffcv peer bench: $count JPEGs ($(du -sh "$photos" | cut -f1)), $(nproc) cores, workers=$workers, runs=$runs, epochs=$epochs"

rm -f "$out"/*.vals "$out"/*.json "$out"/load.txt
load() { cut -d' ' -f1-3 /proc/loadavg; }
val() { $py -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
pack_timed() { # name run pack-options...: packdata into a scratch folder, timed from outside
    local name=$1 i=$2 dst="$out/scratch-$1"
    shift 2
    rm -rf "$dst"
    fpy time -- "$packdata" pack "$photos" "$dst" "$@" --workers "$workers" --quiet >"$out/$name.$i.json"
    rm -rf "$dst"
    $py -c "import json,sys; d=json.load(open(sys.argv[1])); n=int(sys.argv[2]); print(n/d['seconds'], n/d['cpu_seconds'])" \
        "$out/$name.$i.json" "$count" >>"$out/$name.vals"
}
for ((i = 0; i < runs; i++)); do
    echo "round $((i + 1)): load $(load)" | tee -a "$out/load.txt"
    # writers
    rm -f "$out/scratch.beton"
    fpy write "$photos" "$out/scratch.beton" --workers "$workers" 2>/dev/null >"$out/ffcv-write.$i.json"
    rm -f "$out/scratch.beton"
    echo "$(val "$out/ffcv-write.$i.json" images_per_sec) $(val "$out/ffcv-write.$i.json" images_per_cpu_sec)" \
        >>"$out/ffcv-write.vals"
    pack_timed pack-keep-rst4 "$i" --encode keep --jpeg-restart 4
    pack_timed pack-jpeg90 "$i" --encode jpeg --quality 90
    pack_timed pack-keep "$i" --encode keep
    # loaders
    fpy load "$beton" --workers "$workers" --batch 256 --size 224 --epochs "$epochs" 2>/dev/null \
        >"$out/ffcv-load.$i.json"
    "$fastload" bench "$flset" --workers "$workers" --batch 256 --size 224 --augment rrc,flip \
        --order random --epochs "$epochs" --json >"$out/fastload-load.$i.json"
done
echo "load after: $(load)" | tee -a "$out/load.txt"
((quick)) && echo "(--quick: a smoke run; the ratios below mean little)"

$py - "$out" "$runs" <<'PY'
import json, os, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])

def col(name, k):
    return [float(l.split()[k]) for l in open(os.path.join(out, name + ".vals"))]

def loads(name):
    return [json.load(open(os.path.join(out, f"{name}.{i}.json"))) for i in range(runs)]

ff, fl = loads("ffcv-load"), loads("fastload-load")

def fl_epochs(d):  # per-epoch images, seconds and CPU seconds of a fastload bench run
    n = d["images"] / d["epochs"]
    return n, [n / r for r in d["images_per_sec_per_epoch"]], d["cpu_seconds_per_epoch"]

def fl_steady(d, cpu=False):  # epochs 2..E
    n, secs, cpus = fl_epochs(d)
    return (len(secs) - 1) * n / sum((cpus if cpu else secs)[1:])

def fl_first_cpu(d):
    n, _, cpus = fl_epochs(d)
    return n / cpus[0]

series = {
    "ffcv-write": col("ffcv-write", 0), "ffcv-write-cpu": col("ffcv-write", 1),
    "keep-rst4": col("pack-keep-rst4", 0), "keep-rst4-cpu": col("pack-keep-rst4", 1),
    "jpeg90": col("pack-jpeg90", 0), "jpeg90-cpu": col("pack-jpeg90", 1),
    "keep": col("pack-keep", 0), "keep-cpu": col("pack-keep", 1),
    "ff-first": [d["first_epoch_images_per_sec"] for d in ff],
    "ff-first-cpu": [d["first_epoch_images_per_cpu_sec"] for d in ff],
    "ff-steady": [d["steady_images_per_sec"] for d in ff],
    "ff-steady-cpu": [d["steady_images_per_cpu_sec"] for d in ff],
    "fl-first": [d["images_per_sec_per_epoch"][0] for d in fl],
    "fl-steady": [fl_steady(d) for d in fl],
    "fl-steady-cpu": [fl_steady(d, cpu=True) for d in fl],
    "fl-first-cpu": [fl_first_cpu(d) for d in fl],
    "fl-cores": [fl_steady(d) / fl_steady(d, cpu=True) for d in fl],
    "ff-cores": [d["steady_images_per_sec"] / d["steady_images_per_cpu_sec"] for d in ff],
}
med = {k: statistics.median(v) for k, v in series.items()}
rows = [  # figure, fastload series, FFCV series, target
    ("writer keep+rst4 (w1), img/s", "keep-rst4", "ffcv-write", 4.0),
    ("  same, per CPU-s", "keep-rst4-cpu", "ffcv-write-cpu", 4.0),
    ("writer jpeg q90 (w2), img/s", "jpeg90", "ffcv-write", None),
    ("  same, per CPU-s", "jpeg90-cpu", "ffcv-write-cpu", None),
    ("writer keep (w3), img/s", "keep", "ffcv-write", None),
    ("  same, per CPU-s", "keep-cpu", "ffcv-write-cpu", None),
    ("loader steady (epochs 2..E), img/s", "fl-steady", "ff-steady", 4.0),
    ("  same, per CPU-s", "fl-steady-cpu", "ff-steady-cpu", 4.0),
    ("  cores used (CPU-s per wall-s)", "fl-cores", "ff-cores", None),
    ("loader first epoch, img/s", "fl-first", "ff-first", None),
    ("  same, per CPU-s", "fl-first-cpu", "ff-first-cpu", None),
]
print(f"{'figure':42} {'fastload':>9} {'FFCV':>8} {'ratio':>7} {'target':>7}       {'runs (fastload / FFCV)'}")
summary = []
for name, a, b, target in rows:
    r = med[a] / med[b]
    verdict = "" if target is None else ("PASS" if r >= target else "MISS")
    tgt = "-" if target is None else ">=%gx" % target
    fmt = "%.2f" if "cores" in name else "%.0f"
    runs_txt = " ".join(fmt % x for x in series[a]) + " / " + " ".join(fmt % x for x in series[b])
    va, vb = fmt % med[a], fmt % med[b]
    print(f"{name:42} {va:>9} {vb:>8} {r:6.2f}x {tgt:>7} {verdict:4}  {runs_txt}")
    summary.append(dict(figure=name, fastload=med[a], ffcv=med[b], ratio=r, target=target,
                        verdict=verdict or None, fastload_runs=series[a], ffcv_runs=series[b]))
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(f"(medians of {runs} interleaved rounds; FFCV {ff[0]['ffcv']}, batch {ff[0]['batch_shape']} uint8;"
      f" per-run JSON under {out})")
PY
