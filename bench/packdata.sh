#!/usr/bin/env bash
# packdata.sh — packdata throughput beside its peers, measured in the same run (medians of hyperfine runs):
#   (a) `pack --encode jpeg --max-side 256` with 1 and 2 workers vs the single-core libjpeg-turbo
#       full-size decode rate of the same files (target with 2 workers: >= 1.2x);
#   (b) `pack --encode keep` (2 workers, CRC32C per record) vs a plain Python LMDB writer (target: >= 1.0x).
# Input: photo-like JPEGs (~0.2 megapixels) cut from real photographs (bench/make_photos.py).
# Usage: bench/packdata.sh [--count N (default 2000)] [--runs R (default 5)] [--build DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
count=2000 runs=5 build="$root/build"
while (($#)); do
    case "$1" in
        --count) count=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "packdata.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
packdata="$build/tools/packdata/packdata"
decbench="$(find "$build" -name fl_decode_bench -type f -perm -u+x | head -1)"
[[ -x "$packdata" ]] || { echo "packdata.sh: $packdata not built (run scripts/setup.sh)" >&2; exit 1; }
[[ -n "$decbench" ]] || { echo "packdata.sh: fl_decode_bench not built" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "packdata.sh: needs hyperfine (apt-get install hyperfine)" >&2; exit 1; }
/usr/bin/python3 -c "import lmdb, PIL" 2>/dev/null || { echo "packdata.sh: needs python3-lmdb and python3-pil (apt-get install)" >&2; exit 1; }

out="$root/bench/out/packdata"
photos="$root/bench/out/photos-0.2mp-$count"
mkdir -p "$out"
[[ -d "$photos" ]] || /usr/bin/python3 "$root/bench/make_photos.py" "$photos" --count "$count" --mean-pixels 200000
mapfile -t files < <(find "$photos" -name '*.jpg' | sort)
n=${#files[@]}
echo "packdata bench: $n JPEGs, $(du -sh "$photos" | cut -f1), $(nproc) cores"

# median seconds of a hyperfine JSON export
median() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][0]['median'])" "$1"; }
hf() { # name command...
    local name=$1; shift
    hyperfine --style none --warmup 1 --runs "$runs" --export-json "$out/$name.json" "$@" >/dev/null
    median "$out/$name.json"
}

taskset -c 0 "$decbench" --json "${files[@]}" >"$out/decode.json"
dec_rate=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['full_decode_per_sec'])" "$out/decode.json")
dec_cpu=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['full_decode_per_cpu_sec'])" "$out/decode.json")
t_j1=$(hf jpeg-w1 --prepare "rm -rf $out/j1" "$packdata pack $photos $out/j1 --encode jpeg --max-side 256 --workers 1 --quiet")
t_j2=$(hf jpeg-w2 --prepare "rm -rf $out/j2" "$packdata pack $photos $out/j2 --encode jpeg --max-side 256 --workers 2 --quiet")
t_keep=$(hf keep --prepare "rm -rf $out/keep" "$packdata pack $photos $out/keep --encode keep --workers 2 --quiet")
t_lmdb=$(hf pylmdb --prepare "rm -rf $out/pylmdb" "/usr/bin/python3 $root/bench/lmdb_writer.py $photos $out/pylmdb")
"$packdata" verify "$out/keep" >/dev/null && "$packdata" verify "$out/j2" >/dev/null

/usr/bin/python3 - "$n" "$dec_rate" "$t_j1" "$t_j2" "$t_keep" "$t_lmdb" "$dec_cpu" "$out" <<'PY'
import json, os, sys
n, dec, j1, j2, keep, lm, dec_cpu = int(sys.argv[1]), *map(float, sys.argv[2:8])
out = sys.argv[8]
def cpu_seconds(name):
    r = json.load(open(os.path.join(out, name + ".json")))["results"][0]
    return r["user"] + r["system"]
rows = [
    ("pack --encode jpeg --max-side 256, 1 worker", n / j1, "1-core full decode", dec, None),
    ("pack --encode jpeg --max-side 256, 2 workers", n / j2, "1-core full decode", dec, 1.2),
    ("pack --encode keep, 2 workers", n / keep, "python3-lmdb writer", n / lm, 1.0),
]
print(f"{'figure':48} {'img/s':>9}  {'peer':22} {'img/s':>9} {'ratio':>6} {'target':>7}")
for name, v, peer, pv, target in rows:
    r = v / pv
    t = f">={target:.1f}x" if target else "-"
    verdict = "" if target is None else ("PASS" if r >= target else "MISS")
    print(f"{name:48} {v:9.0f}  {peer:22} {pv:9.0f} {r:5.2f}x {t:>7} {verdict}")
print("(medians of hyperfine runs; decode rate from fl_decode_bench pinned to one core)")
# Wall-clock rates swing with whatever else runs on the machine; CPU time per image does much less.
cores = os.cpu_count()
per_cpu = n / cpu_seconds("jpeg-w2")
r = cores * per_cpu / dec_cpu
print(f"per CPU-second: pack --encode jpeg {per_cpu:.0f} img/s vs full decode {dec_cpu:.0f} img/s; "
      f"projected on {cores} idle cores: {r:.2f}x the 1-core decode rate (target >=1.2x: "
      f"{'PASS' if r >= 1.2 else 'MISS'})")
print(f"load average during the run: {os.getloadavg()[0]:.1f} on {cores} cores")
PY
