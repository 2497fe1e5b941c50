#!/usr/bin/env bash
# mask_codec.sh — how to store masks: PNG or zstd (`packdata pack --mask-codec png|zstd`, both
# lossless), on two sets: the detection set of bench/detection_loader.sh (~400x350 photos, 1-6
# drawn objects, 6 class ids, semantic masks from COCO polygons) and a VOC-like segmentation set
# (bench/mask_codec.py voc: 500x375 palette masks, 20 classes, 5-px void borders). For each set
# and codec: packed size (the whole set and the masks' share: total minus the set packed without
# masks), the pack's CPU time, and the loader through RRC 320 + flip, 2 workers: images/s and
# images per CPU-second (the tool's cpu_seconds), medians of --runs interleaved runs. --old BIN
# adds a fastload binary to compare (e.g. one built before a change) on the PNG sets.
# Usage: bench/mask_codec.sh [--runs R (3)] [--count N (600)] [--build DIR] [--old FASTLOAD]
#                            [--out DIR (/tmp/fastload-bench/mask_codec)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=3 count=600 build="$root/build" old="" out="/tmp/fastload-bench/mask_codec"
while (($#)); do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        --count) count=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --old) old=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "mask_codec.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
done
py=/usr/bin/python3
fastload="$build/tools/fastload/fastload" packdata="$build/tools/packdata/packdata"
[[ -x "$fastload" && -x "$packdata" ]] || { echo "mask_codec.sh: build $build first" >&2; exit 1; }
mkdir -p "$out"
det="$out/det-$count" voc="$out/voc-$((count / 2))"
[[ -f "$det/instances.json" ]] || $py "$root/bench/detection_loader.py" make "$det" --count "$count"
[[ -d "$voc/SegmentationClass" ]] || $py "$root/bench/mask_codec.py" voc "$voc" --count "$((count / 2))"

# pack NAME ARGS...: packs $out/NAME once; prints "bytes cpu_seconds"
pack() {
    local name=$1; shift
    if [[ ! -d "$out/$name" ]]; then
        /usr/bin/time -o "$out/$name.time" -f "%U %S" "$packdata" pack "$@" "$out/$name" --encode keep --quiet
    fi
    echo "$(du -sb "$out/$name" | cut -f1) $(awk '{print $1 + $2}' "$out/$name.time")"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
bench() { # BIN SET: "images_per_sec images_per_cpu_sec"
    "$1" bench "$2" --augment rrc,flip --size 320 --batch 32 --workers 2 --epochs 2 --json |
        $py -c "import json,sys; d=json.load(sys.stdin); print(d['images_per_sec'], d['images_per_cpu_sec'])"
}
declare -A size cpu wall percpu
for s in det voc; do
    if [[ $s == det ]]; then src=(--coco "$det/instances.json" --root "$det/images"); m=(--masks)
    else src=("$voc/JPEGImages"); m=(--mask-dir "$voc/SegmentationClass"); fi
    for c in png zstd; do
        read -r size[$s-$c] cpu[$s-$c] < <(pack "$s-$c" "${src[@]}" "${m[@]}" --mask-codec $c)
    done
    if [[ $s == det ]]; then read -r size[$s-none] cpu[$s-none] < <(pack "$s-none" "${src[@]}")
    else # the same JPEGs as a one-class ImageFolder (symlinks)
        mkdir -p "$voc/folder/x"
        for f in "$voc"/JPEGImages/*.jpg; do ln -sf "$f" "$voc/folder/x/"; done
        read -r size[$s-none] cpu[$s-none] < <(pack "$s-none" "$voc/folder"); fi
done
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= runs; r++)); do
    for s in det voc; do
        for k in ${old:+old-png} png zstd; do
            bin=$fastload; c=$k
            [[ $k == old-png ]] && bin=$old c=png
            read -r w p < <(bench "$bin" "$out/$s-$c")
            wall[$s-$k]+="$w " percpu[$s-$k]+="$p "
            printf 'run %d %s %-7s %7.0f images/s %7.0f per CPU-s\n' "$r" "$s" "$k" "$w" "$p"
        done
    done
done
echo
printf '%-4s %-7s %11s %12s %10s %12s %16s\n' set codec "set bytes" "mask bytes" "pack CPU" "images/s" "per CPU-s"
for s in det voc; do
    for k in ${old:+old-png} png zstd; do
        c=${k#old-}
        mb=-; ((${size[$s-none]} > 0)) && mb=$((${size[$s-$c]} - ${size[$s-none]}))
        printf '%-4s %-7s %11s %12s %9.2fs %12.0f %16.0f\n' "$s" "$k" "${size[$s-$c]}" "$mb" "${cpu[$s-$c]}" \
            "$(tr ' ' '\n' <<<"${wall[$s-$k]}" | grep . | median)" "$(tr ' ' '\n' <<<"${percpu[$s-$k]}" | grep . | median)"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
