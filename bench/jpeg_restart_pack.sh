#!/usr/bin/env bash
# jpeg_restart_pack.sh — packing with restart markers (`packdata pack --encode keep
# --jpeg-restart 4`: each JPEG rewritten losslessly) against its bound, the naive rate of
# decoding the same photos fully on 2 cores (two fl_decode_bench processes side by side, each
# decoding every file at full size; their rates summed), and against plain `--encode keep`.
# Photos: bench/make_photos.py (photo-like 4:2:0 JPEGs, ~0.2 MP, q90, PIL's standard tables).
# Each round runs the three in turn (interleaved); figures are medians of --runs rounds, as
# images/s (wall) and images per CPU-second (user+sys: on a shared machine the wall rates
# measure the scheduler too). Then checks the restart-marked set decodes to the same pixels as
# the kept files (fastload digest, no augmentation and RRC + flip). Data from the page cache.
# Usage: bench/jpeg_restart_pack.sh [--count N (2000)] [--runs R (3)] [--seconds S (3)]
#                                   [--build DIR] [--out DIR (/tmp/fastload-bench/jpeg_restart)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
count=2000 runs=3 secs=3 build="$root/build" out="/tmp/fastload-bench/jpeg_restart"
me=jpeg_restart_pack.sh
. "$root/bench/lib_bench.sh"
bench_options "count runs seconds=secs build out" "$@"
py=/usr/bin/python3
packdata="$build/tools/packdata/packdata" fastload="$build/tools/fastload/fastload"
decbench="$build/imaging/fl_decode_bench"
bench_need_built "$packdata" "$fastload" "$decbench"
photos="$out/photos-$count"
mkdir -p "$out"
[[ -d "$photos" ]] || $py "$root/bench/make_photos.py" "$photos" --count "$count" >/dev/null
mapfile -t files < <(find "$photos" -name '*.jpg' | sort)
n=${#files[@]}
cat "${files[@]}" >/dev/null # page cache

# pack NAME ARGS...: "images/s images/CPU-s" of one pack with 2 workers
pack() {
    local name=$1; shift
    rm -rf "$out/$name"
    local t0 t1
    t0=$(date +%s.%N)
    /usr/bin/time -o "$out/time.txt" -f "%U %S" "$packdata" pack "$photos" "$out/$name" --workers 2 --quiet "$@"
    t1=$(date +%s.%N)
    awk -v n="$n" -v t0="$t0" -v t1="$t1" '{print n / (t1 - t0), n / ($1 + $2)}' "$out/time.txt"
}
# the 2-core naive bound: two full-size decoders side by side
decode2() {
    "$decbench" --json --seconds "$secs" "${files[@]}" >"$out/dec1.json" &
    local p1=$!
    "$decbench" --json --seconds "$secs" "${files[@]}" >"$out/dec2.json"
    wait $p1
    $py - "$out/dec1.json" "$out/dec2.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print(a["full_decode_per_sec"] + b["full_decode_per_sec"],
      (a["full_decode_per_cpu_sec"] + b["full_decode_per_cpu_sec"]) / 2)
PY
}
rw=() rc=() kw=() kc=() dw=() dc=()
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; $n photos"
for ((r = 1; r <= runs; r++)); do
    read -r a b < <(pack restart --encode keep --jpeg-restart 4)
    read -r c d < <(pack keep --encode keep)
    read -r e f < <(decode2)
    printf 'round %d: --jpeg-restart 4 %6.0f img/s (%5.0f per CPU-s)  keep %6.0f (%5.0f)  2-core full decode %6.0f (%5.0f)\n' \
        "$r" "$a" "$b" "$c" "$d" "$e" "$f"
    rw+=("$a") rc+=("$b") kw+=("$c") kc+=("$d") dw+=("$e") dc+=("$f")
done
m() { printf '%s\n' "$@" | median; }
RW=$(m "${rw[@]}") RC=$(m "${rc[@]}") KW=$(m "${kw[@]}") KC=$(m "${kc[@]}") DW=$(m "${dw[@]}") DC=$(m "${dc[@]}")
sk=$(du -sb "$out/keep" | cut -f1) sr=$(du -sb "$out/restart" | cut -f1)
same=yes
for aug in none rrc,flip; do
    a=$("$fastload" digest "$out/keep" --augment $aug --size 160 --workers 2 | tail -1)
    b=$("$fastload" digest "$out/restart" --augment $aug --size 160 --workers 2 | tail -1)
    [[ "$a" == "$b" ]] || same=no
done
echo
printf 'pack --encode keep --jpeg-restart 4: %.0f img/s, naive 2-core full decode %.0f img/s: %.2fx (target >= 1.0x)\n' \
    "$RW" "$DW" "$(echo "$RW / $DW" | bc -l)"
printf '  per CPU-second: %.0f vs %.0f img/s: %.2fx; plain keep %.0f img/s (%.0f per CPU-s)\n' \
    "$RC" "$DC" "$(echo "$RC / $DC" | bc -l)" "$KW" "$KC"
printf '  size: %s bytes vs %s kept (%+.2f%%); decoded pixels identical to the kept files: %s\n' \
    "$sr" "$sk" "$(echo "100 * $sr / $sk - 100" | bc -l)" "$same"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ $same == yes ]]
