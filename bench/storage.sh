#!/usr/bin/env bash
# storage.sh — libfastload reading a data set bigger than the page cache it may use, beside the device's
# own limit measured by fio in the same run. Each figure: median of --runs runs.
#   data: raw uint8 records 64x64x3 (12 KiB) and 224x224x3 (147 KiB) cut from real photographs
#         (bench/make_photos.py, python3-skimage's photos; hard-linked copies repeat them to reach --gib),
#         and JPEG records (--encode keep) of the 224-class photos, 4x as many copies (~1 GiB:
#         also >= 4x the limit);
#   memory: every loader run is inside a cgroup v1 memory group limited to --limit-mib (the page
#         cache counts against it; each raw data set is >= 4x the limit), and the page cache is
#         dropped before each run (echo 3 > /proc/sys/vm/drop_caches), so every read is cold;
#   peers: fio on the same shard files, O_DIRECT, io_uring, iodepth 32, 2 jobs, reading as many
#         bytes as the loader's run (2 epochs of the set) — random reads of the record size rounded
#         up to 4 KiB (peer of --order random), the same from buffers in 2 MiB huge pages
#         (--iomem=mmaphuge: each read one DMA segment, so the limit is the device's, not the
#         page size's; the script reserves the huge pages in /proc/sys/vm/nr_hugepages and gives
#         them back at the end) and 1 MiB sequential reads (the limit of --order
#         quasi, which can read whole blocks), each run right before the loader runs it is the
#         peer of; JPEG: the same loader run from a warm page cache (outside the cgroup), to show
#         whether the I/O is hidden behind decode;
#   loader: `fastload bench --io uring --workers 2 --batch 64 --epochs 2` (batch 64 keeps the loader's own
#         buffers well under the cgroup limit), --order random and quasi, with
#         --direct and buffered (cold cache), and --io auto (which must pick O_DIRECT here);
#         useful MB/s (batch bytes delivered) and images/s,
#         read amplification (bytes read / stored bytes delivered), page-cache growth (Cached in
#         /proc/meminfo after - before), the cgroup's peak charge and the loader's peak RSS.
# Ratios: the median over runs of each run's own ratio (figure / peer measured minutes apart in the
# same run), since a virtual disk's rate drifts by 2x from minute to minute; value columns are
# medians of their own.
# Targets: direct random >= 0.9x fio random (12 KiB and 147 KiB) and >= 0.95x fio random from
# huge-page buffers; direct quasi >= 1.5x
# direct random on 12 KiB; direct page-cache growth < 64 MiB; JPEG cold = warm images/s (>= 0.95x).
# Needs root (drop_caches, cgroup), cgroup v1 memory controller, fio (installed with apt-get unless
# --no-setup), python3-skimage + python3-pil. Exit: 0 ok, 1 error, 2 usage, 77 skipped (no root,
# no cgroup v1 memory controller, or no fio).
# Usage: bench/storage.sh [--runs R (5)] [--gib G (2): size of each raw data set] [--limit-mib M (256)]
#                         [--batch B (64)] [--build DIR] [--out DIR (/var/tmp/fl-storage)]
#                         [--keep] [--no-setup]
#   --keep: leave the photos, data sets and per-run JSON under --out (default: removed at the end)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
me=storage.sh
runs=5 gib=2 limit_mib=256 batch=64 build="$root/build" out=/var/tmp/fl-storage keep=0 setup=1
. "$root/bench/lib_bench.sh"
bench_options "runs gib limit-mib=limit_mib batch build out keep:1 no-setup=setup:0" "$@"
bench_positive runs limit_mib batch gib:real
py=/usr/bin/python3
. "$root/bench/lib_memcg.sh"
memcg_preflight
fastload="$build/tools/fastload/fastload"
packdata="$build/tools/packdata/packdata"
bench_need_built "$fastload" "$packdata"

cg="$cgbase/fl-storage.$$"
hp_old="" # nr_hugepages before this script reserved its own (restored at exit)
cleanup() {
    [[ -z $hp_old ]] || echo "$hp_old" >/proc/sys/vm/nr_hugepages
    memcg_remove "$cg"
    if ((keep)); then echo "storage.sh: kept $out"; else rm -rf "$out"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
memcg_new "$cg" "$limit_mib"
mkdir -p "$out/json"

# --- data ---------------------------------------------------------------------------------------
# Unique photos are few (packing decodes each one); hard-linked copies (packdata refuses a path listed
# twice) repeat them to reach the size, which does not matter to the device: every record is its own
# bytes at its own offset.
make_set() { # make_set NAME MEAN_PIXELS COUNT
    [[ -d $out/$1 ]] || { $py "$root/bench/make_photos.py" "$out/$1.tmp" --count "$3" --mean-pixels "$2" \
        >/dev/null && mv "$out/$1.tmp" "$out/$1"; }
}
pack() { # pack NAME PHOTO_DIR COPIES packdata-options...
    local name=$1 src=$2 copies=$3 rep="$2.rep"; shift 3
    [[ -d $out/$name ]] && return 0
    hardlink_list "$src" "$rep" "$copies"
    "$packdata" pack "$rep/all.list" "$out/$name" --class-names "$(ls "$src" | paste -sd,)" "$@" --quiet
}
echo "storage.sh: making the data sets under $out (${gib} GiB each raw set, cgroup limit ${limit_mib} MiB)"
make_set photos64 4096 3000
make_set photos224 60000 1500
n64=$($py -c "import math; print(math.ceil($gib * 2**30 / 12288 / 3000))")
n224=$($py -c "import math; print(math.ceil($gib * 2**30 / 150528 / 1500))")
pack raw64 "$out/photos64" "$n64" --encode raw --resize 64x64 --compress none
pack raw224 "$out/photos224" "$n224" --encode raw --resize 224x224 --compress none
pack jpeg "$out/photos224" $((4 * n224)) --encode keep  # ~1 GiB: also >= 4x the limit
du -sh "$out"/raw64 "$out"/raw224 "$out"/jpeg | sed 's/^/  /'

# --- measuring ----------------------------------------------------------------------------------
cached_kib() { awk '/^Cached:/{print $2}' /proc/meminfo; }
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# in_cg CMD...: run CMD inside the memory group (the shell enters it, then execs CMD)
in_cg() { bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }
# loader NAME DATASET [in_cg|warm] options...: one `fastload bench` run; adds the page-cache growth
# and the cgroup's peak charge to its JSON
loader() {
    local name=$1 ds=$2 where=$3 i=$4; shift 4
    local f="$out/json/$name.$i.json" before after
    if [[ $where == warm ]]; then cat "$out/$ds"/* >/dev/null; else cold; fi
    echo 0 >"$cg/memory.max_usage_in_bytes"
    before=$(cached_kib)
    if [[ $where == warm ]]; then
        "$fastload" bench "$out/$ds" --workers 2 --batch "$batch" --io uring -q --json "$@" >"$f.raw"
    else
        in_cg "$fastload" bench "$out/$ds" --workers 2 --batch "$batch" --io uring -q --json "$@" >"$f.raw"
    fi
    after=$(cached_kib)
    $py - "$f.raw" "$f" "$before" "$after" "$(cat "$cg/memory.max_usage_in_bytes")" "$where" \
        "$(awk '$1=="cache"{print $2}' "$cg/memory.stat")" "$(awk '$1=="shmem"{print $2}' "$cg/memory.stat")" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
# the page cache (and shmem) still charged to the group after the run: the loader's own share
j["cgroup_cache_mib"] = int(sys.argv[7]) / 2**20 if sys.argv[6] != "warm" else None
j["cgroup_shmem_mib"] = int(sys.argv[8] or 0) / 2**20 if sys.argv[6] != "warm" else None
j["page_cache_growth_mib"] = (int(sys.argv[4]) - int(sys.argv[3])) / 1024
j["cgroup_peak_mib"] = int(sys.argv[5]) / 2**20 if sys.argv[6] != "warm" else None
# fastload bench reports it (bytes read / stored bytes delivered); older builds did not
if "read_amplification" not in j:
    j["read_amplification"] = j["bytes_read"] / j["bytes_out"] if j["bytes_out"] else None
json.dump(j, open(sys.argv[2], "w"))
EOF
    rm -f "$f.raw"
}
# fio_run NAME DATASET RW BS RUN [IOMEM]: the device's limit on the same shard files, reading what
# the loader's 2-epoch run reads (each of the 2 jobs one epoch's bytes: random reads without
# repeats within a pass, as an epoch of the loader); IOMEM: fio's --iomem (mmaphuge: buffers in
# huge pages)
fio_run() {
    local name=$1 ds=$2 rw=$3 bs=$4 i=$5 iomem=${6:-malloc} files mib
    files=$(ls "$out/$ds"/*.fls | paste -sd:)
    mib=$(stat -c %s "$out/$ds"/*.fls | awk '{s += $1} END {print int(s / 1048576)}')
    cold
    fio --name="$name" --filename="$files" --rw="$rw" --bs="$bs" --direct=1 --ioengine=io_uring \
        --iodepth=32 --numjobs=2 --group_reporting --io_size="${mib}m" --iomem="$iomem" \
        --output-format=json >"$out/json/$name.$i.raw"
    $py - "$out/json/$name.$i.raw" "$out/json/$name.$i.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["jobs"][0]["read"]
json.dump({"mb_per_sec": r["bw_bytes"] / 1e6, "iops": r["iops"]}, open(sys.argv[2], "w"))
EOF
    rm -f "$out/json/$name.$i.raw"
}

# Huge pages for fio's buffers (--iomem=mmaphuge: anonymous MAP_HUGETLB mappings): per job
# iodepth x 148 KiB rounded up to 2 MiB pages, 2 jobs, and room to spare.
hp_need=16
hp_old=$(cat /proc/sys/vm/nr_hugepages)
echo $((hp_old + hp_need)) >/proc/sys/vm/nr_hugepages
hp_have=$(($(cat /proc/sys/vm/nr_hugepages) - hp_old))
if ((hp_have < hp_need)); then # memory too fragmented for more 2 MiB pages
    echo "storage.sh: only $hp_have of $hp_need huge pages could be reserved: the huge-page fio peer is skipped" >&2
fi

# 2 epochs for raw sets (RSS across epochs); JPEG runs (random-resized-crop 224 + flip) are
# decode-bound: about 10,000 images each
jb=(--size 224 --augment "rrc,flip" --batches $((10000 / batch)))
for ((i = 1; i <= runs; i++)); do
    echo "storage.sh: run $i of $runs"
    for ds in raw64 raw224; do
        [[ $ds == raw64 ]] && bs=12k || bs=148k
        fio_run "fio-rand${bs}" "$ds" randread "$bs" "$i"
        ((hp_have < hp_need)) || fio_run "fio-rand${bs}-huge" "$ds" randread "$bs" "$i" mmaphuge
        loader "$ds-direct-random" "$ds" cg "$i" --order random --direct --epochs 2
        # --io auto inside the cgroup: must pick O_DIRECT (the set is 4x the limit) and say so
        [[ $ds == raw64 ]] && loader raw64-auto-random raw64 cg "$i" --order random --io auto --epochs 2
        loader "$ds-buffered-random" "$ds" cg "$i" --order random --epochs 2
        fio_run "fio-seq-$ds" "$ds" read 1m "$i"
        loader "$ds-direct-quasi" "$ds" cg "$i" --order quasi --direct --epochs 2
        loader "$ds-buffered-quasi" "$ds" cg "$i" --order quasi --epochs 2
    done
    loader jpeg-direct-random jpeg cg "$i" --order random --direct "${jb[@]}"
    loader jpeg-warm-random jpeg warm "$i" --order random "${jb[@]}"
    loader jpeg-buffered-random jpeg cg "$i" --order random "${jb[@]}"
done

# --- table --------------------------------------------------------------------------------------
$py - "$out/json" "$runs" "$limit_mib" <<'EOF'
import json, os, statistics, sys
d, runs, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def have(name):
    return os.path.exists(os.path.join(d, f"{name}.1.json"))
def med(name, key):
    if not have(name):
        return None
    v = [json.load(open(os.path.join(d, f"{name}.{i}.json"))).get(key) for i in range(1, runs + 1)]
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None
def maxof(name, key):
    """highest of a per-epoch list over the runs; a run shorter than an epoch (JPEG) has none:
    its peak RSS then"""
    v = []
    for i in range(1, runs + 1):
        j = json.load(open(os.path.join(d, f"{name}.{i}.json")))
        v.append(max(j[key]) if j.get(key) else j["peak_rss_mib"])
    return max(v)
def paired(name, peer, key):
    """median over runs of run i's figure / run i's peer"""
    v = []
    for i in range(1, runs + 1 if have(peer) else 1):
        a = json.load(open(os.path.join(d, f"{name}.{i}.json"))).get(key)
        b = json.load(open(os.path.join(d, f"{peer}.{i}.json"))).get(key)
        if a is not None and b:
            v.append(a / b)
    return statistics.median(v) if v else None
rows = []  # figure, value, peer label, peer value, name, target, paired ratio
def row(fig, name, label, peer, target="", key="mb_per_sec"):
    rows.append((fig, med(name, key), label, med(peer, key), name, target, paired(name, peer, key)))
for ds, rec, fr, fs in (("raw64", "raw 64x64x3 12 KiB", "fio-rand12k", "fio-seq-raw64"),
                        ("raw224", "raw 224x224x3 147 KiB", "fio-rand148k", "fio-seq-raw224")):
    rows.append((f"fio randread {fr[8:]}, {ds} files", med(fr, "mb_per_sec"), f"{med(fr, 'iops'):,.0f} IOPS", None, None, "", None))
    fh = fr + "-huge"
    if have(fh):
        rows.append((f"fio randread {fr[8:]} huge pages", med(fh, "mb_per_sec"), f"{med(fh, 'iops'):,.0f} IOPS", None, None, "", None))
    rows.append((f"fio seq read 1m, {ds} files", med(fs, "mb_per_sec"), "", None, None, "", None))
    for mode in ("direct", "buffered"):
        r = f"{ds}-{mode}-random"; q = f"{ds}-{mode}-quasi"
        row(f"{rec} {mode} random", r, "fio randread", fr, ">=0.9" if mode == "direct" else "")
        if have(fh):
            row(f"{rec} {mode} random", r, "fio rand huge pg", fh, ">=0.95" if mode == "direct" else "")
        row(f"{rec} {mode} quasi", q, "fio randread", fr)
        row(f"{rec} {mode} quasi", q, f"{mode} random", r, ">=1.5" if mode == "direct" and ds == "raw64" else "")
        row(f"{rec} {mode} quasi", q, "fio seq 1m", fs)
    if ds == "raw64":
        row(f"{rec} --io auto random", "raw64-auto-random", "direct random", "raw64-direct-random")
for mode in ("direct", "buffered"):
    row(f"JPEG {mode} cold random (img/s)", f"jpeg-{mode}-random", "warm page cache", "jpeg-warm-random",
        ">=0.95", key="images_per_sec")
print(f"\n(medians of {runs} runs; ratio: median of the runs' own figure/peer ratios; loader: 2 workers, io_uring, inside a {limit} MiB memory cgroup, "
      "page cache dropped before each run; MB/s = 1e6 B/s of records delivered; "
      "amp = bytes read / stored bytes delivered; cache = Cached growth (whole machine); cg cache = page cache still charged to the cgroup after the run; cg = cgroup peak; RSS = loader peak)")
hdr = f"| {'figure':<38} | {'value':>9} | {'peer':<16} | {'peer value':>10} | {'ratio':>6} | {'target':>6} | {'amp':>5} | {'cache MiB':>9} | {'cg cache':>8} | {'cg MiB':>6} | {'RSS MiB':>7} |"
print(hdr); print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
for fig, val, peer, pval, name, target, pr in rows:
    ratio = f"{pr:.2f}x" if pr else ""
    extra = ["", "", "", "", ""]
    if name:
        amp = med(name, "read_amplification"); cache = med(name, "page_cache_growth_mib")
        cgp = med(name, "cgroup_peak_mib"); rss = maxof(name, "rss_mib_per_epoch")
        cgc = med(name, "cgroup_cache_mib")
        extra = [f"{amp:.2f}" if amp else "", f"{cache:.0f}", f"{cgc:.0f}" if cgc is not None else "-",
                 f"{cgp:.0f}" if cgp is not None else "-", f"{rss:.0f}"]
    print(f"| {fig:<38} | {val:>9,.0f} | {peer:<16} | {(f'{pval:,.0f}' if pval else ''):>10} | {ratio:>6} | {target:>6} | "
          f"{extra[0]:>5} | {extra[1]:>9} | {extra[2]:>8} | {extra[3]:>6} | {extra[4]:>7} |")
rss = {n: json.load(open(os.path.join(d, f"{n}.1.json")))["rss_mib_per_epoch"]
       for n in ("raw64-direct-random", "raw224-direct-random")}
print("--io auto (run 1): " + json.load(open(os.path.join(d, "raw64-auto-random.1.json"))).get("io_mode", "?"))
print("RSS per epoch (run 1, MiB): " + "; ".join(f"{k} {[round(x) for x in v]}" for k, v in rss.items()))
EOF
