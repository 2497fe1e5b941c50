#!/usr/bin/env bash
# shared_cores.sh — CPU training beside two busy processes (what a loader's decode threads, a
# second job or a noisy neighbour do to the cores): each configuration trains quiet, then with
# two busy loops started beside it, and keeps what share of its quiet images/s? Configurations:
#   tf reference     trainfast --cpu-backend reference (its own thread pool, waits on a condvar)
#   tf onednn        trainfast --cpu-backend onednn with its defaults (OMP_WAIT_POLICY=passive
#                    unless the user set a policy: trainer/main.c)
#   tf onednn spin   the same with GOMP_SPINCOUNT=300000 (libgomp's own default: the spin before)
#   tf onednn 1 thr  --threads 1 (fewer threads; not a default: the thread count changes the sums)
#   pytorch          bench/pytorch_fmnist.py --device cpu (torch.set_num_threads = cores)
#   pytorch passive  the same under OMP_WAIT_POLICY=passive
# fastcnn width 24, batch 128, 2,000 photo-like images packed raw at 32x32, --epochs E; images/s
# is each tool's JSON images_per_sec, CPU its user+sys (/usr/bin/time). Medians of --runs rounds,
# the configurations interleaved within each. Then bit-identity: every trainfast run of a
# configuration (quiet and loaded) must end with the same checkpoint (tf_ckpt_compare).
# Target: >= 40% of the quiet images/s kept beside the two busy processes.
# Usage: bench/shared_cores.sh [--runs R (3)] [--epochs E (1)] [--build DIR]
#                              [--out DIR (/tmp/fastload-bench/shared_cores)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=3 epochs=1 build="$root/build" out="/tmp/fastload-bench/shared_cores"
me=shared_cores.sh
. "$root/bench/lib_bench.sh"
bench_options "runs epochs build out" "$@"
py=/usr/bin/python3
tf="$build/trainer/trainfast" pd="$build/tools/packdata/packdata" cmp="$build/tests/trainer/tf_ckpt_compare"
bench_need_built "$tf" "$pd" "$cmp"
$py -c "import torch" 2>/dev/null || { echo "shared_cores.sh: needs python3-torch" >&2; exit 1; }
export FASTLOAD_LIBRARY="${FASTLOAD_LIBRARY:-$build/libfastload.so}"
mkdir -p "$out"
photos="$out/photos" data="$out/p32" val="$out/p32val"
[[ -d "$photos" ]] || $py "$root/bench/make_photos.py" "$photos" --count 2000 >/dev/null
[[ -d "$data" ]] || "$pd" pack "$photos" "$data" --encode raw --resize 32x32 --compress none --quiet
[[ -d "$val" ]] || "$pd" pack "$photos" "$val" --encode raw --resize 32x32 --compress none --part 0/16 --quiet

hogs=()
busy_start() { local k; for k in 1 2; do bash -c 'while :; do :; done' & hogs+=($!); done; }
busy_stop() { ((${#hogs[@]})) && kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null || true; hogs=(); }
trap busy_stop EXIT

labels=("tf reference" "tf onednn" "tf onednn spin" "tf onednn 1 thr" "pytorch" "pytorch passive")
# one I NAME: run configuration I; prints "images/s cpu_seconds"
one() {
    local i=$1 name=$2 e=() a=()
    case $i in
        0) a=(--cpu-backend reference) ;;
        1) a=(--cpu-backend onednn) ;;
        2) a=(--cpu-backend onednn) e=(GOMP_SPINCOUNT=300000) ;;
        3) a=(--cpu-backend onednn --threads 1) ;;
        5) e=(OMP_WAIT_POLICY=passive) ;;
    esac
    if ((i < 4)); then
        rm -rf "$out/ck-$name"
        env "${e[@]}" /usr/bin/time -o "$out/$name.time" -f "%U %S" "$tf" train --data "$data" --val "$val" \
            --model fastcnn --width 24 --batch 128 --epochs "$epochs" --device cpu --json --quiet \
            --checkpoint "$out/ck-$name" "${a[@]}" >"$out/$name.json" 2>"$out/$name.err"
    else
        env "${e[@]}" /usr/bin/time -o "$out/$name.time" -f "%U %S" $py "$root/bench/pytorch_fmnist.py" \
            --device cpu --data "$data" --val "$val" --model fastcnn --width 24 --batch 128 \
            --epochs "$epochs" --json >"$out/$name.json" 2>"$out/$name.err"
    fi || { echo "shared_cores.sh: ${labels[$i]} failed:" >&2; tail -3 "$out/$name.err" >&2; exit 1; }
    $py - "$out/$name.json" "$out/$name.time" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
u, s = map(float, open(sys.argv[2]).read().split()[-2:])
print(d["images_per_sec"], u + s)
PY
}
declare -A q l qc lc
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
for ((r = 1; r <= runs; r++)); do
    for i in "${!labels[@]}"; do
        read -r a ac < <(one "$i" "q$i-$r")
        busy_start
        read -r b bc < <(one "$i" "l$i-$r")
        busy_stop
        q[$i]+="$a " l[$i]+="$b " qc[$i]+="$ac " lc[$i]+="$bc "
        printf 'round %d %-16s quiet %6.0f img/s (%.1f CPU-s)  beside 2 busy %6.0f img/s (%.1f CPU-s)  %3.0f%%\n' \
            "$r" "${labels[$i]}" "$a" "$ac" "$b" "$bc" "$(echo "100 * $b / $a" | bc -l)"
    done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo
printf '%-16s %12s %14s %6s %16s  %s\n' configuration "quiet img/s" "beside 2 busy" kept "CPU-s q / busy" "bit-identical runs"
for i in "${!labels[@]}"; do
    Q=$(median <<<"${q[$i]}") L=$(median <<<"${l[$i]}") QC=$(median <<<"${qc[$i]}") LC=$(median <<<"${lc[$i]}")
    same=-
    if ((i < 4)); then
        same=yes
        ref=$(ls "$out/ck-q$i-1"/*.tfc | sort | tail -1)
        for ((r = 1; r <= runs; r++)); do
            for k in q l; do
                c=$(ls "$out/ck-$k$i-$r"/*.tfc | sort | tail -1)
                "$cmp" "$ref" "$c" >/dev/null 2>&1 || same=no
            done
        done
    fi
    printf '%-16s %12.0f %14.0f %5.0f%% %7.1f / %-6.1f  %s\n' "${labels[$i]}" "$Q" "$L" \
        "$(echo "100 * $L / $Q" | bc -l)" "$QC" "$LC" "$same"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg) (quiet = no busy loops of ours; the machine's own load stays)"
