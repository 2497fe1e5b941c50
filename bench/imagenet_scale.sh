#!/usr/bin/env bash
# imagenet_scale.sh — packing and opening an ImageNet-1k-sized data set: 1,000 class folders of small
# JPEGs (bench/gen_imagenet_layout.py; 1,281,167 files at full size), measured at a given record
# count so two runs (e.g. 128,117 and 1,281,167) show what grows with the count:
#   pack, one process (--encode keep, --workers 2): wall, CPU, peak RSS (/usr/bin/time -v), img/s
#   plan sizes of the killed run (DST.partial/plan.txt, the short form; DST.partial.plan, the
#     whole plan beside it) and manifest.json size
#   --resume restart cost: a pack SIGKILLed once about half its shards are written, then resumed:
#     the resumed run's wall and peak RSS against the uninterrupted one
#   packdata info / verify: wall and peak RSS
#   loader: `fastload bench --batches 1 --json` open time (startup_seconds), first batch after open,
#     peak RSS, for rank 0 of 1 and rank 1 of 2; the Python binding's open time, first batch and
#     peak RSS
#   one array task without a scheduler: `pack --part 0/4 --workers 1` (wall, peak RSS) and the
#     `--resume` of that finished part (what a requeued task that had finished costs)
#   pack as a 4-task Slurm array on the private one-node cluster of tests/slurm/cluster.sh (2 CPUs,
#     1 per task, so two tasks at a time), submit to verify done: wall and each task's peak RSS;
#     the parts' random-order `fastload digest` of the first 20 batches == the one-process pack's
# Heavy steps run under `nice -n 10` (the machine may be shared: say so with the figures).
#
# With --tar the source is ImageNet's train-tar layout instead (one tar of 1,000 per-class tars, made
# once from the folder with tar(1)), packed in place by packdata; only the packs (one process, array),
# info and verify run (the dataset is the same records, so the loader figures are the folder run's).
#
# Usage: bench/imagenet_scale.sh [--records N] [--work DIR] [--build DIR] [--shard-size S] [--no-slurm] [--tar]
#   --records N     1281167 (default, ImageNet-1k's train count) or fewer: the per-class counts
#                   scale (128117 = a tenth)
#   --work DIR      sources, packs and logs (default /var/tmp/fl-imagenet; a few GB per 1.28 M)
#   --build DIR     the build with packdata/fastload (default: build/)
#   --shard-size S  packdata --shard-size (default 64M)
#   --no-slurm      skip the Slurm array run (needs root, slurm-wlm and munge)
#   --tar           pack WORK/src-N.tar (per-class tars inside one tar) instead of the folder
# Prints one `key value` line per figure and writes them to WORK/results-N.txt.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
records=1281167 work=/var/tmp/fl-imagenet build="$root/build" shard=64M slurm=1 tar=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --records) records=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --shard-size) shard=$2; shift 2 ;;
        --no-slurm) slurm=0; shift ;;
        --tar) tar=1; shift ;;
        -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "imagenet_scale.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
done
P="$build/tools/packdata/packdata" F="$build/tools/fastload/fastload"
for t in "$P" "$F" /usr/bin/time; do [[ -x $t ]] || { echo "imagenet_scale.sh: $t missing" >&2; exit 1; }; done
mkdir -p "$work" && work=$(cd "$work" && pwd)
src="$work/src-$records" run="$work/run-$records" res="$work/results-$records.txt"
((tar)) && run="$work/run-$records-tar" res="$work/results-$records-tar.txt"
mkdir -p "$run"
: >"$res"
say() { echo "$1 $2" | tee -a "$res"; }
# tv FILE KEY: a field of /usr/bin/time -v's report
tv() { sed -n "s/^\s*$2: //p" "$1" | head -1; }
secs() { awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }' <<<"$1"; }
timed() { # timed NAME CMD...: run under nice + /usr/bin/time -v; say wall/RSS/CPU
    local name=$1
    shift
    nice -n 10 /usr/bin/time -v -o "$run/$name.time" "$@" >"$run/$name.out" 2>"$run/$name.err"
    local rc=$?
    say "$name.wall_s" "$(secs "$(tv "$run/$name.time" 'Elapsed (wall clock) time (h:mm:ss or m:ss)')")"
    say "$name.peak_rss_mib" "$(awk '{ printf "%.1f", $1 / 1024 }' <<<"$(tv "$run/$name.time" 'Maximum resident set size (kbytes)')")"
    say "$name.cpu_s" "$(awk '{ printf "%.1f", $1 + $2 }' <<<"$(tv "$run/$name.time" 'User time (seconds)') $(tv "$run/$name.time" 'System time (seconds)')")"
    return $rc
}

say date "$(date -u +%FT%TZ)"
say machine "$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ ! -d $src ]] || [[ $(find "$src/" -maxdepth 2 -name .complete | wc -l) -lt 1000 ]]; then
    echo "generating $src ..."
    nice -n 10 /usr/bin/python3 "$root/bench/gen_imagenet_layout.py" "$src" --total "$records" || exit 1
fi
say source.files "$(find "$src/" -type f -name '*.JPEG' | wc -l)"
say source.du "$(du -sh "$src/" | cut -f1)"
if ((tar)); then
    # ImageNet's ILSVRC2012_img_train.tar layout: <wnid>.tar per class (members <wnid>_<k>.JPEG)
    # inside one plain tar
    if [[ ! -f $src.tar ]]; then
        echo "making $src.tar ..."
        inner="$work/tar-inner-$records"
        rm -rf "$inner" && mkdir -p "$inner" || exit 1
        for d in "$src"/*/; do
            c=$(basename "$d")
            (cd "$d" && nice -n 10 tar -cf "$inner/$c.tar" --sort=name -- *.JPEG) || exit 1
        done
        (cd "$inner" && nice -n 10 tar -cf "$src.tar.tmp" --sort=name -- *.tar) && mv "$src.tar.tmp" "$src.tar" || exit 1
        rm -rf "$inner"
    fi
    src="$src.tar"
    say source.tar_bytes "$(stat -c %s "$src")"
fi
opts=(--encode keep --shard-size "$shard")

# ---- one process -------------------------------------------------------------------------------
rm -rf "$run/one" "$run/one.partial"
timed pack_one "$P" pack "$src" "$run/one" "${opts[@]}" --workers 2 || { cat "$run/pack_one.err"; exit 1; }
say pack_one.line "$(grep -m1 'img/s' "$run/pack_one.err")"
say manifest.bytes "$(stat -c %s "$run/one/manifest.json")"
nshards=$(ls "$run/one" | grep -c '\.fls$')
say shards "$nshards"
say dataset.bytes "$(du -sb "$run/one" | cut -f1)"
timed info "$P" info "$run/one" || cat "$run/info.err"
timed verify "$P" verify "$run/one" || cat "$run/verify.err"

if ((!tar)); then
# ---- kill at ~50 %, --resume -------------------------------------------------------------------
rm -rf "$run/kill" "$run/kill.partial" "$run/kill.partial.plan"
total=$(du -sb "$run/one" | cut -f1)
nice -n 10 "$P" pack "$src" "$run/kill" "${opts[@]}" --workers 2 --quiet &
pid=$!
t0=$(date +%s.%N)
# SIGKILL once the shards written reach half of the whole pack's bytes (shards grow as they are
# written, so this does not depend on the shard size)
while kill -0 "$pid" 2>/dev/null; do
    n=$(du -sb "$run/kill.partial" 2>/dev/null | cut -f1)
    ((${n:-0} * 2 >= total)) && { kill -KILL "$pid"; break; }
    sleep 0.2
done
wait "$pid" 2>/dev/null
say kill.after_s "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
say plan_txt.bytes "$(stat -c %s "$run/kill.partial/plan.txt" 2>/dev/null || echo missing)"
say plan_full.bytes "$(stat -c %s "$run/kill.partial.plan" 2>/dev/null || echo missing)"
say partial.shards "$(ls "$run/kill.partial" 2>/dev/null | grep -c '\.fls$')"
say partial.bytes "$(du -sb "$run/kill.partial" 2>/dev/null | cut -f1)"
timed resume "$P" pack "$src" "$run/kill" "${opts[@]}" --workers 2 --resume || cat "$run/resume.err"
say resume.line "$(grep -m1 'resuming' "$run/resume.err")"
# a requeued task whose part is complete: what `--resume` costs to find that out (list, stat and
# compare every input with the finished job's record)
timed resume_complete "$P" pack "$src" "$run/kill" "${opts[@]}" --workers 2 --resume || cat "$run/resume_complete.err"

# ---- loader open / first batch -----------------------------------------------------------------
lb=(--batches 1 --json --workers 2 --batch 256 --size 64 --augment rrc,flip -q)
for rw in "0 1" "1 2"; do
    set -- $rw
    nice -n 10 "$F" bench "$run/one" "${lb[@]}" --rank "$1" --world "$2" >"$run/bench-$1-$2.json" 2>"$run/bench.err"
    j=$(tail -n 1 "$run/bench-$1-$2.json")
    for k in startup_seconds seconds peak_rss_mib; do
        say "loader_r$1w$2.$k" "$(sed -n "s/.*\"$k\":\([0-9.e+-]*\).*/\1/p" <<<"$j")"
    done
done
lib=$(ls "$build"/libfastload.so 2>/dev/null)
if [[ -n $lib ]]; then
    FASTLOAD_LIBRARY=$lib PYTHONPATH="$root/python" nice -n 10 /usr/bin/python3 - "$run/one" <<'EOF' >"$run/python.out" 2>&1
import resource, sys, time
t0 = time.perf_counter()
import fastload
t1 = time.perf_counter()
L = fastload.Loader(sys.argv[1], batch_size=256, workers=2, size=64, augment="rrc", flip=True)
t2 = time.perf_counter()
b = L.next_batch()
t3 = time.perf_counter()
print(f"python.import_s {t1 - t0:.3f}\npython.open_s {t2 - t1:.3f}\npython.first_batch_s {t3 - t2:.3f}")
print(f"python.peak_rss_mib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
EOF
    while read -r k v; do say "$k" "$v"; done <"$run/python.out"
fi

fi # the folder source only

# ---- one part of 4, as an array task runs it, and its --resume once finished -----------------------
rm -rf "$run/part0" "$run/part0.partial"
timed part0 "$P" pack "$src" "$run/part0" "${opts[@]}" --workers 1 --part 0/4 || cat "$run/part0.err"
timed part0_resume_complete "$P" pack "$src" "$run/part0" "${opts[@]}" --workers 1 --part 0/4 --resume ||
    cat "$run/part0_resume_complete.err"
say part0_resume_complete.line "$(head -n 1 "$run/part0_resume_complete.out")"

# ---- Slurm array of 4 tasks ----------------------------------------------------------------------
if ((slurm)) && why=$(bash "$root/tests/slurm/cluster.sh" check); then
    cl="$run/cluster"
    bash "$root/tests/slurm/cluster.sh" stop "$cl" >/dev/null 2>&1
    rm -rf "$cl" "$run/array" "$run/array.logs"
    bash "$root/tests/slurm/cluster.sh" start "$cl" >/dev/null || exit 1
    . "$cl/env.sh"
    # each task's packdata under /usr/bin/time -v, nice'd like the rest
    cat >"$run/packdata-timed" <<EOF
#!/bin/bash
exec nice -n 10 /usr/bin/time -v -o "$run/array.logs/time-\${SLURM_ARRAY_TASK_ID:-verify}-\${SLURM_JOB_ID}.txt" "$P" "\$@"
EOF
    chmod +x "$run/packdata-timed"
    mkdir -p "$run/array.logs"
    t0=$(date +%s.%N)
    PACKDATA="$run/packdata-timed" bash "$root/scripts/slurm/pack.sh" --parts 4 --cpus 1 --wait \
        --logs "$run/array.logs" "$src" "$run/array" "${opts[@]}" >/dev/null 2>"$run/array.err"
    rc=$?
    say array.submit_to_verified_s "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
    say array.status "$([[ $rc -eq 0 ]] && echo ok || echo "FAILED: $(tail -n 3 "$run/array.err")")"
    for i in 0 1 2 3; do
        f=$(ls "$run"/array.logs/time-$i-*.txt 2>/dev/null | tail -1)
        [[ -n $f ]] || continue
        say "array.part$i.wall_s" "$(secs "$(tv "$f" 'Elapsed (wall clock) time (h:mm:ss or m:ss)')")"
        say "array.part$i.peak_rss_mib" "$(awk '{ printf "%.1f", $1 / 1024 }' <<<"$(tv "$f" 'Maximum resident set size (kbytes)')")"
    done
    bash "$root/tests/slurm/cluster.sh" stop "$cl" >/dev/null
    d1=$("$F" digest "$run/one" --order random --seed 1 --batch 256 --size 64 --batches 20 --workers 2 2>&1 | tail -n 1)
    d2=$("$F" digest "$run/array" --order random --seed 1 --batch 256 --size 64 --batches 20 --workers 2 2>&1 | tail -n 1)
    say array.digest_equal "$([[ -n $d1 && $d1 == "$d2" ]] && echo yes || echo "NO ($d1 vs $d2)")"
else
    say array.skipped "${why:---no-slurm}"
fi
echo "results: $res"
