#!/usr/bin/env bash
# index_memory.sh — what opening a data set costs per record: the reader's index memory, open time
# and peak RSS at a tenth of ImageNet-1k and at its full 1,281,167 records, for shards and LMDB.
# The sets are made by tests/formats/fl_make_scale_set from one packed source set (records copied
# in order, ImageNet-length names, the source's sizes and class order), so they take a minute, not
# a pack of a million files. Per set, the median of --runs runs of:
#   fastload bench --batches 1 --json (rank 0 of 1 and rank 1 of 2): startup_seconds, peak RSS and
#   CPU seconds (/usr/bin/time -v); Python fastload.Loader: open, first batch, peak RSS;
#   packdata info: wall and peak RSS.
# Prints "SET WHAT KEY VALUE ..." lines and the load average beside them.
# Usage: bench/index_memory.sh --src DIR [--work DIR] [--build DIR] [--runs N] [--sizes "N..."]
#   --src DIR    an uncompressed classic data set to copy records from (e.g. `packdata pack
#                src-128117 DIR --encode keep --shard-size 64M` of bench/gen_imagenet_layout.py's
#                output)
#   --work DIR   where the sets go (default /var/tmp/fl-index-memory; ~1.6 GB per 1.28 M set)
#   --build DIR  the build with fastload, packdata, libfastload.so, fl_make_scale_set (default build)
#   --runs N     runs per figure (default 3)
#   --sizes LIST records per set (default "128117 1281167")
set -u
me=index_memory.sh
root=$(cd "$(dirname "$0")/.." && pwd)
src="" work=/var/tmp/fl-index-memory build="$root/build" runs=3 sizes="128117 1281167"
. "$root/bench/lib_bench.sh"
bench_options "src work build runs sizes" "$@"
[[ -n $src ]] || { echo "$me: --src DIR is required (try --help)" >&2; exit 2; }
F=$build/tools/fastload/fastload P=$build/tools/packdata/packdata
M=$build/tests/formats/fl_make_scale_set
bench_need_built "$F" "$P" "$M" /usr/bin/time
mkdir -p "$work" || exit 1
tv() { grep "$2" "$1" | awk '{print $NF}'; }
mib() { awk '{printf "%.1f", $1 / 1024}'; }

for n in $sizes; do
    for kind in shards lmdb; do
        set_=$work/$kind-$n
        [[ -f $set_/manifest.json ]] && continue
        rm -rf "$set_" "$set_.partial"
        flag=""; [[ $kind == lmdb ]] && flag=--lmdb
        nice -n 10 "$M" "$src" "$set_" "$n" $flag >/dev/null || exit 1
    done
done

t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
for n in $sizes; do
    for kind in shards lmdb; do
        set_=$work/$kind-$n
        for rw in "0 1" "1 2"; do
            read -r r w <<<"$rw"
            for ((i = 0; i < runs; i++)); do
                /usr/bin/time -v "$F" bench "$set_" --batches 1 --json --workers 2 --batch 256 \
                    --size 64 --augment rrc,flip -q --rank "$r" --world "$w" >"$t/j" 2>"$t/tv"
                echo "$(sed -n 's/.*"startup_seconds":\([0-9.e+-]*\).*/\1/p' "$t/j") $(tv "$t/tv" Maximum | mib) $(awk -v u="$(tv "$t/tv" 'User time')" -v s="$(tv "$t/tv" 'System time')" 'BEGIN { print u + s }')"
            done >"$t/runs"
            echo "$kind-$n bench_rank${r}_of_$w startup_s $(cut -d' ' -f1 "$t/runs" | median) peak_rss_mib $(cut -d' ' -f2 "$t/runs" | median) cpu_s $(cut -d' ' -f3 "$t/runs" | median)"
        done
        for ((i = 0; i < runs; i++)); do
            FASTLOAD_LIBRARY=$build/libfastload.so PYTHONPATH="$root/python" /usr/bin/python3 - "$set_" <<'EOF'
import resource, sys, time
import fastload
t0 = time.perf_counter()
L = fastload.Loader(sys.argv[1], batch_size=256, workers=2, size=64, augment="rrc", flip=True)
t1 = time.perf_counter()
L.next_batch()
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
EOF
        done >"$t/runs"
        echo "$kind-$n python open_s $(cut -d' ' -f1 "$t/runs" | median) first_batch_s $(cut -d' ' -f2 "$t/runs" | median) peak_rss_mib $(cut -d' ' -f3 "$t/runs" | median)"
        for ((i = 0; i < runs; i++)); do
            /usr/bin/time -v "$P" info "$set_" >/dev/null 2>"$t/tv"
            echo "$(tv "$t/tv" Elapsed | awk -F: '{print $(NF-1) * 60 + $NF}') $(tv "$t/tv" Maximum | mib)"
        done >"$t/runs"
        echo "$kind-$n info wall_s $(cut -d' ' -f1 "$t/runs" | median) peak_rss_mib $(cut -d' ' -f2 "$t/runs" | median)"
    done
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
