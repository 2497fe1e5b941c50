#!/usr/bin/env bash
# detection_loader.sh — detection loading: libfastload vs a PyTorch DataLoader doing the same work,
# measured in the same run. The set: photo-like JPEGs with 1-6 objects drawn on each (boxes, class
# per box, semantic mask; bench/detection_loader.py make), packed with
# `packdata pack --coco instances.json --root images --masks` (fields image, boxes, labels,
# iscrowd, mask). Both sides: random-resized-crop to SIZE x SIZE + flip applied to the image
# (bilinear), the mask (nearest) and the boxes (shift, scale, clip, drop, flip), batches of B
# padded boxes + counts, 2 workers:
#   fastload  `fastload bench --augment rrc,flip --size SIZE --workers 2 --json`
#   PyTorch   DataLoader(num_workers=2) over a Dataset doing PIL decode of image and mask PNG,
#             PIL resize through the crop, numpy box geometry (bench/detection_loader.py torch).
# Each figure is the median of --runs interleaved runs; the ratio is fastload / PyTorch (target
# >= 5x), of wall-clock rates and of images per CPU-second (user + system of the whole process
# tree, /usr/bin/time: on a busy 2-core machine wall rates measure the scheduler as much as the
# loaders). Data is read from the page cache.
# --mask-codec png|zstd packs the masks so (default: packdata's default); the PyTorch side reads
# the mask PNGs either way, as a user's Dataset would.
# Usage: bench/detection_loader.sh [--count N (600)] [--runs R (3)] [--epochs E (2)] [--size S (320)]
#                                  [--batch B (32)] [--mask-codec C] [--build DIR]
#                                  [--out DIR (bench/out/detection)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
count=600 runs=3 epochs=2 size=320 batch=32 build="$root/build" out="$root/bench/out/detection" codec=""
me=detection_loader.sh
. "$root/bench/lib_bench.sh"
bench_options "count runs epochs size batch mask-codec=codec build out" "$@"
py=/usr/bin/python3
fastload="$build/tools/fastload/fastload"
packdata="$build/tools/packdata/packdata"
[[ -x "$fastload" && -x "$packdata" ]] || { echo "detection_loader.sh: build $build first" >&2; exit 1; }
$py -c "import torch, PIL, numpy" 2>/dev/null ||
    { echo "detection_loader.sh: needs python3-torch, python3-pil, python3-numpy (Debian)" >&2; exit 1; }

src="$out/src-$count" set="$out/set-$count${codec:+-$codec}"
mkdir -p "$out"
[[ -f "$src/instances.json" ]] || $py "$root/bench/detection_loader.py" make "$src" --count "$count"
[[ -d "$set" ]] || "$packdata" pack --coco "$src/instances.json" --root "$src/images" "$set" --masks \
    --encode keep --quiet ${codec:+--mask-codec "$codec"}

# timed CMD...: prints "images_per_sec images_per_cpu_sec" from the command's JSON and its CPU time
timed() {
    local t="$out/time.txt" j
    j=$(/usr/bin/time -o "$t" -f "%U %S" "$@")
    $py -c "import json,sys; d=json.loads(sys.argv[1]); u,s=map(float,open(sys.argv[2]).read().split()[-2:]); print(d['images_per_sec'], d['images']/(u+s))" "$j" "$t"
}
fl_rates=() pt_rates=() fl_cpu=() pt_cpu=()
for ((r = 1; r <= runs; r++)); do
    read -r f fc < <(timed "$fastload" bench "$set" --augment rrc,flip --size "$size" --batch "$batch" \
        --workers 2 --epochs "$epochs" --json)
    read -r p pc < <(timed $py "$root/bench/detection_loader.py" torch "$src" --workers 2 --batch "$batch" \
        --size "$size" --epochs "$epochs")
    printf 'run %d: fastload %.0f images/s (%.0f per CPU-s), PyTorch %.0f images/s (%.0f per CPU-s)\n' \
        "$r" "$f" "$fc" "$p" "$pc"
    fl_rates+=("$f") pt_rates+=("$p") fl_cpu+=("$fc") pt_cpu+=("$pc")
done
fm=$(printf '%s\n' "${fl_rates[@]}" | median) pm=$(printf '%s\n' "${pt_rates[@]}" | median)
fcm=$(printf '%s\n' "${fl_cpu[@]}" | median) pcm=$(printf '%s\n' "${pt_cpu[@]}" | median)
"$fastload" bench "$set" --augment rrc,flip --size "$size" --batch "$batch" --workers 2 --epochs 1 |
    grep -E "fields|result" | sed 's/^/  /'
printf 'detection (boxes + masks, RRC %d + flip, batch %d, 2 workers, %d images x %d epochs):\n' \
    "$size" "$batch" "$count" "$epochs"
printf '  wall:     fastload %.0f images/s, PyTorch DataLoader %.0f images/s: %.2fx (target >= 5x)\n' \
    "$fm" "$pm" "$(echo "$fm / $pm" | bc -l)"
printf '  per CPU-s: fastload %.0f, PyTorch DataLoader %.0f: %.2fx (load %s)\n' \
    "$fcm" "$pcm" "$(echo "$fcm / $pcm" | bc -l)" "$(cut -d' ' -f1-3 /proc/loadavg)"
