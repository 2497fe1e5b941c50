#!/usr/bin/env bash
# packdata_large.sh — packdata writing a data set larger than the memory it may use, beside fio's
# sequential write on the same disk in the same run. Each figure: median of --runs.
#   data (each --gib, of real photographs: bench/make_photos.py, python3-skimage's photos; hard-linked
#         copies repeat them to reach the size): raw uint8 224x224x3 records (147 KiB; packdata
#         decodes and resizes: `pack --encode raw --resize 224x224 --compress none --workers 2`), and
#         ImageNet-like JPEGs (~0.6 megapixels, ~100 KB) stored as they are (`--encode keep`: read,
#         CRC, write: packdata's least CPU per byte), also into LMDB (`--backend lmdb`); 256 MiB shards;
#   memory: each run inside a cgroup v1 memory group limited to --limit-mib (the page cache counts
#         against it; the data set is >= 4x the limit), page cache dropped before each run;
#   packdata: as shipped (each shard's written chunks go to the disk and leave the page cache while it
#         is written, the whole shard once fsync'ed; LMDB: data.mdb after each fsync'ed commit of 32 MiB:
#         formats/page_cache.c), and with
#         FL_WRITER_KEEP_CACHE=1 (the kernel alone decides when written pages leave the cache);
#   peers: fio sequential write of the same byte count to one file on the same file system, 1 MiB
#         blocks: buffered + fsync at the end (psync, 1 job: how packdata writes) and O_DIRECT (io_uring,
#         iodepth 8: the device's limit); inside the same cgroup;
#   uncapped (unless --no-uncapped): packdata as shipped and with FL_WRITER_KEEP_CACHE=1 in a memory
#         group without a limit (it only counts), where nothing bounds the page cache but the machine's RAM;
#   figures: MB/s = bytes written / wall seconds of the process (1e6 B/s; packdata's include decode,
#         resize and the fsyncs); cores = CPU seconds / wall seconds (2.0 on 2 cores: CPU-bound, unless
#         other processes take the cores); peak RSS (wait4's ru_maxrss); the group's page cache
#         (memory.stat cache) highest sampled every 0.1 s and at the end, its dirty + writeback pages
#         highest sampled, its peak charge (memory.max_usage_in_bytes).
# Needs root (drop_caches, cgroup), cgroup v1 memory controller, fio (installed with apt-get unless
# --no-setup), python3-skimage + python3-pil. Exit: 0 ok, 1 error, 2 usage, 77 skipped (no root, no
# cgroup v1 memory controller, or no fio). Runtime (2-core VM, virtio disk): 3-5 minutes with the defaults.
# Usage: bench/packdata_large.sh [--runs R (3)] [--gib G (2)] [--limit-mib M (256)] [--build DIR]
#                                [--out DIR (/var/tmp/fl-packlarge)] [--keep] [--no-setup] [--no-uncapped]
#   --keep: leave the photos and per-run JSON under --out (default: removed at the end)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
me=packdata_large.sh
runs=3 gib=2 limit_mib=256 build="$root/build" out=/var/tmp/fl-packlarge keep=0 setup=1 uncapped=1
. "$root/bench/lib_bench.sh"
bench_options "runs gib limit-mib=limit_mib build out keep:1 no-setup=setup:0 no-uncapped=uncapped:0" "$@"
bench_positive runs limit_mib gib:real
py=/usr/bin/python3
. "$root/bench/lib_memcg.sh"
memcg_preflight
packdata="$build/tools/packdata/packdata"
bench_need_built "$packdata"

# cg: the memory group limited to --limit-mib; cgfree: one without a limit, only to count the page
# cache of the uncapped runs apart from the rest of the machine's
cg="$cgbase/fl-packlarge.$$" cgfree="$cgbase/fl-packlarge-free.$$"
cleanup() {
    memcg_remove "$cg" "$cgfree"
    if ((keep)); then echo "packdata_large.sh: kept $out"; rm -rf "$out/dst" "$out/fio.dat"; else rm -rf "$out"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
memcg_new "$cg" "$limit_mib"
memcg_new "$cgfree"
mkdir -p "$out/json"
dev=$(disk_of "$out")

# --- data: photos, and a list naming each of them `copies` times (hard links) ------------------
# photoset NAME COUNT MEAN_PIXELS RECORD_BYTES|file: makes $out/NAME and $out/NAME.rep/all.list, enough
# copies for --gib of records (RECORD_BYTES each, or the photos' own file sizes); sets copies
photoset() {
    local photos="$out/$1" rep="$out/$1.rep" per
    [[ -d $photos ]] || { $py "$root/bench/make_photos.py" "$photos.tmp" --count "$2" --mean-pixels "$3" \
        >/dev/null && mv "$photos.tmp" "$photos"; }
    if [[ $4 == file ]]; then per=$(du -sb "$photos" | cut -f1); else per=$(($4 * $2)); fi
    copies=$($py -c "import math; print(math.ceil($gib * 2**30 / $per))")
    if [[ ! -f $rep/all.list || $(cat "$rep/copies" 2>/dev/null) != "$copies" ]]; then
        hardlink_list "$photos" "$rep" "$copies"
        echo "$copies" >"$rep/copies"
    fi
}
photoset photos224 1500 60000 150528
bytes=$((copies * 1500 * 150528))
photoset photosjpeg600k 500 600000 file
jpeg_total=$(($(du -sb "$out/photosjpeg600k" | cut -f1) * copies))
classes=$(ls "$out/photos224" | paste -sd,)
echo "packdata_large.sh: raw set $((bytes >> 20)) MiB, JPEG set $((jpeg_total >> 20)) MiB" \
     "($(($(du -sb "$out/photosjpeg600k" | cut -f1) / 500 / 1000)) KB a file); cgroup limit ${limit_mib} MiB" \
     "($(($((bytes >> 20)) / limit_mib))x); disk ${dev:-?} under $out"

# --- measuring ----------------------------------------------------------------------------------
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# measure NAME RUN WHERE(cg|free) ENV CMD...: one sampled run; WHERE cg runs it in the memory group
measure() {
    local name=$1 i=$2 where=$3 env=$4; shift 4
    local f="$out/json/$name.$i.json" opts=()
    if [[ $where == cg ]]; then opts+=(--cgroup "$cg"); else opts+=(--cgroup "$cgfree"); fi
    [[ -n $dev ]] && opts+=(--disk "$dev")
    rm -rf "$out/dst" "$out/fio.dat" "$out/stdout"; mkdir -p "$out/stdout"
    cold
    env $env $py "$root/bench/mem_sample.py" "${opts[@]}" --stdout-dir "$out/stdout" -- "$@" >"$f.sample"
    $py - "$f.sample" "$out/stdout/0.out" "$f" "$bytes" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
if s["rc"] != [0]:
    sys.exit(f"packdata_large.sh: {sys.argv[3]}: the command failed (exit {s['rc']})")
try:
    tool = json.loads(open(sys.argv[2]).read() or "null")
except ValueError:
    tool = None
# packdata --json: its own bytes_out; fio: the byte count it was given
s["bytes"] = tool["bytes_out"] if tool and "bytes_out" in tool else int(sys.argv[4])
s["mb_per_sec"] = s["bytes"] / s["seconds"] / 1e6
json.dump(s, open(sys.argv[3], "w"))
PYEOF
    rm -f "$f.sample"
}
pack=("$packdata" pack "$out/photos224.rep/all.list" "$out/dst" --class-names "$classes" --encode raw
      --resize 224x224 --compress none --workers 2 --json --quiet)
packj=("$packdata" pack "$out/photosjpeg600k.rep/all.list" "$out/dst" --class-names "$classes" --encode keep
       --workers 2 --json --quiet)
packl=("${packj[@]}" --backend lmdb)
fio_w=(fio --name=seqw --filename="$out/fio.dat" --rw=write --bs=1m --size="$bytes" --numjobs=1 --output-format=json)
for ((i = 1; i <= runs; i++)); do
    echo "packdata_large.sh: run $i of $runs"
    measure fio-buffered "$i" cg "" "${fio_w[@]}" --ioengine=psync --end_fsync=1
    measure fio-direct "$i" cg "" "${fio_w[@]}" --ioengine=io_uring --iodepth=8 --direct=1
    measure pack "$i" cg "" "${pack[@]}"
    measure pack-keepcache "$i" cg "FL_WRITER_KEEP_CACHE=1" "${pack[@]}"
    measure packj "$i" cg "" "${packj[@]}"
    measure packj-keepcache "$i" cg "FL_WRITER_KEEP_CACHE=1" "${packj[@]}"
    measure packl "$i" cg "" "${packl[@]}"
    measure packl-keepcache "$i" cg "FL_WRITER_KEEP_CACHE=1" "${packl[@]}"
    if ((uncapped)); then
        measure pack-uncapped "$i" free "" "${pack[@]}"
        measure pack-keepcache-uncapped "$i" free "FL_WRITER_KEEP_CACHE=1" "${pack[@]}"
    fi
done
rm -rf "$out/dst" "$out/fio.dat"

# --- table --------------------------------------------------------------------------------------
$py - "$out/json" "$runs" "$limit_mib" "$bytes" "$uncapped" <<'PYEOF'
import json, os, statistics, sys
d, runs, limit, nbytes, uncapped = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
def load(name): return [json.load(open(os.path.join(d, f"{name}.{i}.json"))) for i in range(1, runs + 1)]
def med(name, key):
    v = [j.get(key) for j in load(name)]
    v = [x[0] if isinstance(x, list) else x for x in v if x is not None]
    return statistics.median(v) if v else None
fb, fd = med("fio-buffered", "mb_per_sec"), med("fio-direct", "mb_per_sec")
print(f"\n(medians of {runs} runs; {nbytes / 2**20:,.0f} MiB raw written per run; cgroup limit {limit} MiB; "
      "MB/s = 1e6 B/s of bytes written over the process's wall time; vs fio: ratio to fio's buffered+fsync "
      "and O_DIRECT sequential write; cores = CPU s / wall s; RSS = peak resident set; cache = the group's page "
      "cache, highest sampled / at the end; dirty = its dirty + writeback pages, highest sampled; peak = its "
      "peak charge; uncapped rows: a group without a limit)")
hdr = (f"| {'run':<50} | {'MB/s':>6} | {'vs fio buf':>10} | {'vs fio dir':>10} | {'cores':>5} | {'RSS MiB':>7} | "
       f"{'cache MiB peak/end':>18} | {'dirty MiB':>9} | {'peak MiB':>8} |")
print(hdr); print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
rows = [("fio-buffered", "fio write 1m, buffered + end fsync (psync)"), ("fio-direct", "fio write 1m, O_DIRECT (io_uring, qd 8)"),
        ("pack", "packdata raw (drops written pages)"), ("pack-keepcache", "packdata raw, FL_WRITER_KEEP_CACHE=1"),
        ("packj", "packdata JPEG keep (drops written pages)"), ("packj-keepcache", "packdata JPEG keep, FL_WRITER_KEEP_CACHE=1"),
        ("packl", "packdata JPEG keep, LMDB (drops committed pages)"), ("packl-keepcache", "packdata JPEG keep, LMDB, FL_WRITER_KEEP_CACHE=1")]
if uncapped:
    rows += [("pack-uncapped", "packdata raw (drops written pages), uncapped"),
             ("pack-keepcache-uncapped", "packdata raw, FL_WRITER_KEEP_CACHE=1, uncapped")]
for name, label in rows:
    mb = med(name, "mb_per_sec")
    cores = statistics.median(j["cpu_seconds"][0] / j["seconds"] for j in load(name))
    cache = f"{med(name, 'cg_cache_peak_mib'):.0f} / {med(name, 'cg_cache_end_mib'):.0f}"
    print(f"| {label:<50} | {mb:>6,.0f} | {mb / fb:>9.2f}x | {mb / fd:>9.2f}x | {cores:>5.2f} | {med(name, 'peak_rss_mib'):>7.0f} | "
          f"{cache:>18} | {med(name, 'cg_dirty_peak_mib'):>9.0f} | {med(name, 'cg_peak_mib'):>8.0f} |")
print("per-run MB/s: " + "; ".join(f"{n} {[round(j['mb_per_sec']) for j in load(n)]}" for n, _ in rows))
PYEOF
