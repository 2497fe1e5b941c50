#!/usr/bin/env bash
# nproc_threads.sh — data parallel on one node must not cost throughput: `trainfast train --nproc 2`
# (two ranks under mpirun, each with its default compute threads: the node's cores divided by its
# local ranks) beside one process (all cores), on the CPU, and the old default for comparison
# (--nproc 2 --threads <all cores>: every rank takes every core). fastcnn on 2,000 photo-like
# images packed raw at 32x32 (bench/make_photos.py), batch 128 per process, 3 epochs (a 1/16
# validation slice). Figures: trainfast's JSON images_per_sec (the job's training steps) and images
# per CPU-second (user+sys of the whole process tree, /usr/bin/time); medians of --runs
# interleaved rounds. Target: --nproc 2 >= 0.9x one process.
# Usage: bench/nproc_threads.sh [--runs R (3)] [--epochs E (3)] [--backend reference|onednn]
#                               [--build DIR] [--out DIR (/tmp/fastload-bench/nproc)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=3 epochs=3 build="$root/build" out="/tmp/fastload-bench/nproc" backend=""
me=nproc_threads.sh
. "$root/bench/lib_bench.sh"
bench_options "runs epochs backend build out" "$@"
py=/usr/bin/python3
tf="$build/trainer/trainfast" pd="$build/tools/packdata/packdata"
bench_need_built "$tf" "$pd"
command -v mpirun >/dev/null || { echo "nproc_threads.sh: needs mpirun (openmpi-bin)" >&2; exit 1; }
mkdir -p "$out"
photos="$out/photos" data="$out/p32" val="$out/p32val"
[[ -d "$photos" ]] || $py "$root/bench/make_photos.py" "$photos" --count 2000 >/dev/null
[[ -d "$data" ]] || "$pd" pack "$photos" "$data" --encode raw --resize 32x32 --compress none --quiet
[[ -d "$val" ]] || "$pd" pack "$photos" "$val" --encode raw --resize 32x32 --compress none --part 0/16 --quiet
cores=$(nproc)
# run NAME ARGS...: "images/s images/CPU-s"
run() {
    local name=$1; shift
    /usr/bin/time -o "$out/$name.time" -f "%U %S" "$tf" train --data "$data" --val "$val" --model fastcnn --device cpu \
        --epochs "$epochs" --batch 128 --json --quiet ${backend:+--cpu-backend "$backend"} "$@" \
        >"$out/$name.json" 2>"$out/$name.err" || { echo "nproc_threads.sh: $name failed:" >&2; tail -3 "$out/$name.err" >&2; exit 1; }
    $py - "$out/$name.json" "$out/$name.time" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
u, s = map(float, open(sys.argv[2]).read().split()[-2:])
print(d["images_per_sec"], d["images"] / (u + s))
PY
}
one=() two=() old=() onec=() twoc=() oldc=()
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $cores cores"
for ((r = 1; r <= runs; r++)); do
    read -r a ac < <(run one)
    read -r b bc < <(run two --nproc 2)
    read -r c cc < <(run old --nproc 2 --threads "$cores")
    printf 'round %d: one process %6.0f img/s (%5.0f per CPU-s)  --nproc 2 %6.0f (%5.0f)  --nproc 2 --threads %d %6.0f (%5.0f)\n' \
        "$r" "$a" "$ac" "$b" "$bc" "$cores" "$c" "$cc"
    one+=("$a") two+=("$b") old+=("$c") onec+=("$ac") twoc+=("$bc") oldc+=("$cc")
done
m() { printf '%s\n' "$@" | median; }
A=$(m "${one[@]}") B=$(m "${two[@]}") C=$(m "${old[@]}") AC=$(m "${onec[@]}") BC=$(m "${twoc[@]}") CC=$(m "${oldc[@]}")
printf -- '\n--nproc 2 (default threads): %.0f img/s vs one process %.0f img/s: %.2fx (target >= 0.9x)\n' "$B" "$A" "$(echo "$B / $A" | bc -l)"
printf '  per CPU-second: %.0f vs %.0f: %.2fx\n' "$BC" "$AC" "$(echo "$BC / $AC" | bc -l)"
printf -- '--nproc 2 --threads %d (each rank all cores): %.0f img/s: %.2fx (per CPU-s %.0f: %.2fx)\n' "$cores" "$C" \
    "$(echo "$C / $A" | bc -l)" "$CC" "$(echo "$CC / $AC" | bc -l)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
