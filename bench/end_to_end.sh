#!/usr/bin/env bash
# end_to_end.sh — the whole pipeline on one set of cores against its bound. With L = the
# loader's images/s alone (fastload bench: JPEG decode + RRC + flip to SIZE, all cores) and C =
# the trainer's images/s alone on pre-decoded data (trainfast on the same photos packed raw at
# SIZE x SIZE, all cores), sharing the cores perfectly gives B = 1/(1/L + 1/C). Measured: trainfast
# training from the JPEG set (its own loader decoding while its threads train) with its default
# --workers and with --workers 2. fastcnn at SIZE (64), batch 128, photo-like JPEGs
# (bench/make_photos.py) packed --encode keep --jpeg-restart 4; medians of --runs interleaved
# rounds, images/s from each tool's JSON. Target: >= 0.95 of B with default options.
# Usage: bench/end_to_end.sh [--runs R (3)] [--count N (3000)] [--epochs E (2)] [--size S (64)]
#                            [--build DIR] [--out DIR (/tmp/fastload-bench/end_to_end)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=3 count=3000 epochs=2 size=64 build="$root/build" out="/tmp/fastload-bench/end_to_end"
me=end_to_end.sh
. "$root/bench/lib_bench.sh"
bench_options "runs count epochs size build out" "$@"
py=/usr/bin/python3
tf="$build/trainer/trainfast" pd="$build/tools/packdata/packdata" fl="$build/tools/fastload/fastload"
bench_need_built "$tf" "$pd" "$fl"
mkdir -p "$out"
photos="$out/photos-$count" jpg="$out/jpg-$count" raw="$out/raw$size-$count" val="$out/val$size-$count"
[[ -d "$photos" ]] || $py "$root/bench/make_photos.py" "$photos" --count "$count" >/dev/null
[[ -d "$jpg" ]] || "$pd" pack "$photos" "$jpg" --encode keep --jpeg-restart 4 --quiet
[[ -d "$raw" ]] || "$pd" pack "$photos" "$raw" --encode raw --resize "${size}x$size" --compress none --quiet
[[ -d "$val" ]] || "$pd" pack "$photos" "$val" --encode raw --resize "${size}x$size" --compress none --part 0/16 --quiet
ips() { $py -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['images_per_sec'])"; }
train() { "$tf" train --val "$val" --model fastcnn --batch 128 --epochs "$epochs" --size "$size" --device cpu \
    --json --quiet "$@" 2>"$out/train.err" | ips; }
Ls=() Cs=() D1=() D2=()
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; $count photos, ${size}px"
for ((r = 1; r <= runs; r++)); do
    L=$("$fl" bench "$jpg" --augment rrc,flip --size "$size" --batch 128 --workers "$(nproc)" --epochs "$epochs" --json | ips)
    C=$(train --data "$raw")
    d1=$(train --data "$jpg")
    d2=$(train --data "$jpg" --workers 2)
    B=$(echo "1 / (1 / $L + 1 / $C)" | bc -l)
    printf 'round %d: L %6.0f  C %6.0f  bound %6.0f  trainfast default %6.0f (%.2f)  --workers 2 %6.0f (%.2f)\n' \
        "$r" "$L" "$C" "$B" "$d1" "$(echo "$d1 / $B" | bc -l)" "$d2" "$(echo "$d2 / $B" | bc -l)"
    Ls+=("$L") Cs+=("$C") D1+=("$d1") D2+=("$d2")
done
m() { printf '%s\n' "$@" | median; }
L=$(m "${Ls[@]}") C=$(m "${Cs[@]}") d1=$(m "${D1[@]}") d2=$(m "${D2[@]}")
B=$(echo "1 / (1 / $L + 1 / $C)" | bc -l)
printf '\nL %.0f img/s, C %.0f img/s, bound 1/(1/L+1/C) %.0f img/s\n' "$L" "$C" "$B"
printf 'trainfast from JPEG, default options: %.0f img/s = %.2f of the bound (target >= 0.95); --workers 2: %.0f (%.2f)\n' \
    "$d1" "$(echo "$d1 / $B" | bc -l)" "$d2" "$(echo "$d2 / $B" | bc -l)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
