#!/usr/bin/env bash
# storage_ranks.sh — several ranks on one node reading one data set bigger than the node's page cache:
# shared page cache (buffered reads) vs --direct, measured with 2 ranks
# (docs/SCALING.md). Each figure: median of --runs runs, page cache dropped before each run.
#   data: raw uint8 224x224x3 records (147 KiB) of real photographs (bench/make_photos.py; hard-linked
#         copies repeat them to reach --gib), packed by packdata in 256 MiB shards;
#   node memory: every loader process runs in ONE cgroup v1 memory group limited to --limit-mib (the
#         node's RAM for page cache; the page cache counts against it); the data set is >= 4x it;
#   loader: `fastload bench --io uring --batch 64 --epochs 2 --order random`, 2 loader threads in all:
#         1 rank  : one process, --workers 2 (the baseline);
#         split   : 2 processes, --rank 0|1 --world 2, --workers 1 each: data-parallel ranks, each
#                   epoch split between them (disjoint records; the usual DDP case);
#         same    : 2 processes, --world 1, same --seed, --workers 1 each: both read every record in
#                   the same order at the same time (two jobs on one data set, or ranks that need the
#                   same batches): the case where a shared page cache could serve the second rank;
#         splitq  : as split, with --order quasi (each rank gets a contiguous share of the epoch's
#                   sequence, so a quasi block's records go to one rank and each rank reads its
#                   blocks as coalesced extents);
#         seeds   : as same, with --seed 0 and 1: both read everything, in different orders;
#         each buffered and with --direct; the 2-rank runs have LOCAL_WORLD_SIZE=2 as torchrun sets it;
#   peer: fio random reads of 148 KiB on the same shard files (O_DIRECT, io_uring, iodepth 32, 2 jobs,
#         each job one pass over the set: the bytes of the loader's 2 epochs): the device's limit
#         for this access pattern;
#   figures: aggregate MB/s (records delivered by all ranks / wall time, 1e6 B/s), device reads /
#         bytes delivered (/proc/diskstats of the data set's disk: other processes' I/O counts too),
#         the cgroup's page cache (highest sampled, at the end), its peak charge, peak RSS per rank,
#         MB delivered per CPU-second (user + system of all ranks, from wait4).
# Needs root, cgroup v1 memory controller, fio (apt-get unless --no-setup), python3-skimage + -pil.
# Exit: 0 ok, 1 error, 2 usage, 77 skipped. Runtime (2-core VM, virtio disk): 2-3 minutes with the defaults.
# Usage: bench/storage_ranks.sh [--runs R (3)] [--gib G (2)] [--limit-mib M (256)]
#                               [--build DIR] [--out DIR (/var/tmp/fl-ranks)] [--keep] [--no-setup]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
me=storage_ranks.sh
runs=3 gib=2 limit_mib=256 build="$root/build" out=/var/tmp/fl-ranks keep=0 setup=1
. "$root/bench/lib_bench.sh"
bench_options "runs gib limit-mib=limit_mib build out keep:1 no-setup=setup:0" "$@"
bench_positive runs limit_mib gib:real
py=/usr/bin/python3
. "$root/bench/lib_memcg.sh"
memcg_preflight
fastload="$build/tools/fastload/fastload"
packdata="$build/tools/packdata/packdata"
bench_need_built "$fastload" "$packdata"

cg="$cgbase/fl-ranks.$$"
cleanup() {
    memcg_remove "$cg"
    if ((keep)); then echo "storage_ranks.sh: kept $out"; else rm -rf "$out"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
memcg_new "$cg" "$limit_mib"
mkdir -p "$out/json"
dev=$(disk_of "$out")

# --- data ---------------------------------------------------------------------------------------
photos="$out/photos224"
[[ -d $photos ]] || { $py "$root/bench/make_photos.py" "$photos.tmp" --count 1500 --mean-pixels 60000 \
    >/dev/null && mv "$photos.tmp" "$photos"; }
copies=$($py -c "import math; print(math.ceil($gib * 2**30 / 150528 / 1500))")
ds="$out/raw224-$copies"
if [[ ! -d $ds ]]; then
    rep="$photos.rep"
    hardlink_list "$photos" "$rep" "$copies"
    "$packdata" pack "$rep/all.list" "$ds" --class-names "$(ls "$photos" | paste -sd,)" --encode raw \
        --resize 224x224 --compress none --quiet
    rm -rf "$rep"
fi
echo "storage_ranks.sh: $(du -sm "$ds" | cut -f1) MiB data set, node memory (cgroup) ${limit_mib} MiB, disk ${dev:-?}"

# --- measuring ----------------------------------------------------------------------------------
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
lb=("$fastload" bench "$ds" --io uring --batch 64 --epochs 2 --order random -q --json)
# two loader processes on the node, as torchrun launches them (it sets LOCAL_WORLD_SIZE, which
# the loader uses to share its extent budget between them)
l2=(env LOCAL_WORLD_SIZE=2 "${lb[@]}")
# ranks NAME RUN CMD [--- CMD]: the loader processes at once, in the cgroup, sampled
ranks() {
    local name=$1 i=$2; shift 2
    local f="$out/json/$name.$i.json" opts=(--cgroup "$cg")
    [[ -n $dev ]] && opts+=(--disk "$dev")
    rm -rf "$out/stdout"; mkdir -p "$out/stdout"
    cold
    $py "$root/bench/mem_sample.py" "${opts[@]}" --stdout-dir "$out/stdout" -- "$@" >"$f.sample"
    $py - "$f.sample" "$out/stdout" "$f" <<'PYEOF'
import glob, json, os, sys
s = json.load(open(sys.argv[1]))
if any(s["rc"]):
    sys.exit(f"storage_ranks.sh: {sys.argv[3]}: a rank failed (exit {s['rc']})")
r = [json.load(open(os.path.join(sys.argv[2], f"{k}.out"))) for k in range(len(s["rc"]))]
s["ranks"] = r
s["bytes_out"] = sum(x["bytes_out"] for x in r)
s["mb_per_sec"] = s["bytes_out"] / s["seconds"] / 1e6
s["rank_mb_per_sec"] = [x["mb_per_sec"] for x in r]
s["mb_per_cpu_sec"] = s["bytes_out"] / sum(s["cpu_seconds"]) / 1e6  # all ranks' threads, user + system
if "disk_read_mib" in s:
    s["device_amplification"] = s["disk_read_mib"] * 2**20 / s["bytes_out"]
json.dump(s, open(sys.argv[3], "w"))
PYEOF
    rm -f "$f.sample"
}
fio_run() {
    local i=$1 files mib
    files=$(ls "$ds"/*.fls | paste -sd:)
    mib=$(stat -c %s "$ds"/*.fls | awk '{s += $1} END {print int(s / 1048576)}')
    cold
    fio --name=rand148k --filename="$files" --rw=randread --bs=148k --direct=1 --ioengine=io_uring \
        --iodepth=32 --numjobs=2 --group_reporting --io_size="${mib}m" \
        --output-format=json >"$out/json/fio.$i.raw"
    $py -c "import json,sys; r=json.load(open(sys.argv[1]))['jobs'][0]['read']; json.dump({'mb_per_sec': r['bw_bytes']/1e6}, open(sys.argv[2],'w'))" \
        "$out/json/fio.$i.raw" "$out/json/fio.$i.json"
    rm -f "$out/json/fio.$i.raw"
}
for ((i = 1; i <= runs; i++)); do
    echo "storage_ranks.sh: run $i of $runs"
    fio_run "$i"
    for mode in buffered direct; do
        d=(); [[ $mode == direct ]] && d=(--direct)
        ranks "1rank-$mode" "$i" "${lb[@]}" "${d[@]}" --workers 2
        ranks "split-$mode" "$i" "${l2[@]}" "${d[@]}" --workers 1 --rank 0 --world 2 --- \
                                "${l2[@]}" "${d[@]}" --workers 1 --rank 1 --world 2
        ranks "splitq-$mode" "$i" "${l2[@]}" "${d[@]}" --workers 1 --rank 0 --world 2 --order quasi --- \
                                 "${l2[@]}" "${d[@]}" --workers 1 --rank 1 --world 2 --order quasi
        ranks "same-$mode" "$i" "${l2[@]}" "${d[@]}" --workers 1 --seed 0 --- "${l2[@]}" "${d[@]}" --workers 1 --seed 0
        ranks "seeds-$mode" "$i" "${l2[@]}" "${d[@]}" --workers 1 --seed 0 --- "${l2[@]}" "${d[@]}" --workers 1 --seed 1
    done
done

# --- table --------------------------------------------------------------------------------------
$py - "$out/json" "$runs" "$limit_mib" "$(du -sm "$ds" | cut -f1)" <<'PYEOF'
import json, os, statistics, sys
d, runs, limit, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(name): return [json.load(open(os.path.join(d, f"{name}.{i}.json"))) for i in range(1, runs + 1)]
def med(name, key, f=lambda x: x):
    v = [f(j[key]) for j in load(name) if j.get(key) is not None]
    return statistics.median(v) if v else None
fio = med("fio", "mb_per_sec")
print(f"\n(medians of {runs} runs; {size} MiB data set of raw 224x224x3 records; every rank in one {limit} MiB memory "
      "cgroup; 2 epochs, random order, io_uring, batch 64, 2 loader threads in all; MB/s = 1e6 B/s of records "
      "delivered by all ranks together over the wall time; vs fio = ratio to fio's random 148 KiB reads (O_DIRECT, qd 32, "
      f"2 jobs: {fio:,.0f} MB/s); dev amp = bytes read from the disk / bytes delivered (whole disk); cg cache = the "
      "cgroup's page cache, highest sampled / at the end; cg peak = its peak charge; RSS = peak per rank; "
      "MB/CPU-s = MB delivered per CPU-second of all ranks, user + system)")
hdr = (f"| {'ranks':<60} | {'MB/s':>6} | {'per rank':>13} | {'vs fio':>6} | {'dev amp':>7} | {'cg cache peak/end':>17} | "
       f"{'cg peak':>7} | {'RSS MiB':>9} | {'MB/CPU-s':>8} |")
print(hdr); print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
labels = {"1rank": "1 rank, 2 workers", "split": "2 ranks, --rank 0|1 --world 2 (disjoint halves)",
          "splitq": "2 ranks, --world 2, --order quasi",
          "same": "2 ranks, both whole epoch, same order", "seeds": "2 ranks, both whole epoch, seeds 0 and 1"}
for mode in ("buffered", "direct"):
    for k, label in labels.items():
        n = f"{k}-{mode}"
        mb = med(n, "mb_per_sec")
        per = [statistics.median(j["rank_mb_per_sec"][r] for j in load(n)) for r in range(len(load(n)[0]["rank_mb_per_sec"]))]
        amp = med(n, "device_amplification")
        rss = [statistics.median(j["peak_rss_mib"][r] for j in load(n)) for r in range(len(per))]
        print(f"| {label + ', ' + mode:<60} | {mb:>6,.0f} | {' + '.join(f'{x:,.0f}' for x in per):>13} | {mb / fio:>5.2f}x | "
              f"{(f'{amp:.2f}' if amp is not None else '-'):>7} | "
              f"{med(n, 'cg_cache_peak_mib'):>8.0f} / {med(n, 'cg_cache_end_mib'):<6.0f} | {med(n, 'cg_peak_mib'):>7.0f} | "
              f"{' + '.join(f'{x:.0f}' for x in rss):>9} | {med(n, 'mb_per_cpu_sec'):>8,.0f} |")
print("per-run aggregate MB/s: " + "; ".join(f"{k}-{m} {[round(j['mb_per_sec']) for j in load(f'{k}-{m}')]}"
                                           for m in ("buffered", "direct") for k in labels))
PYEOF
