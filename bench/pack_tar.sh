#!/bin/bash
# pack_tar.sh — packing an ImageNet-layout tar in place vs packing the extracted folder.
#
# Makes (once, kept in WORK) CLASSES x PER_CLASS small JPEGs cut from the real photographs Debian
# ships (python3-skimage: random crops resized to 40-96 px a side, q85, a per-class colour cast),
# laid out as ImageNet's train set both ways: WORK/train/<wnid>/<wnid>_<k>.JPEG and WORK/train.tar,
# a tar of per-class tars (<wnid>.tar, as ILSVRC2012_img_train.tar). Then RUNS rounds, interleaved
# (the order alternates each round), of
#     packdata pack WORK/train.tar ...   and   packdata pack WORK/train ...
# (default --encode keep, all cores), each under /usr/bin/time -v. Prints per round images/s and
# peak RSS of both, then the medians and the ratio tar/folder (target >= 1.0x) and the tar pack's
# peak RSS (target < 200 MB), and the ratio of images per CPU-second (user + sys), which holds
# up better than wall-clock rates when other jobs share the cores. Both sources are read from the page cache (each is read once before
# the first round): this compares the pack itself, not the disk.
#
# Usage: bench/pack_tar.sh [--work DIR] [--classes 1000] [--per-class 100] [--runs 3]
#        [--build DIR] [-- extra packdata pack options]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
work=/tmp/fastload-pack-tar
classes=1000
per_class=100
runs=3
build="$root/build"
extra=()
while (($#)); do
    case $1 in
    --work) work=$2; shift 2 ;;
    --classes) classes=$2; shift 2 ;;
    --per-class) per_class=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: $0 [--work DIR] [--classes N] [--per-class N] [--runs N] [--build DIR] [-- pack options]" >&2; exit 2 ;;
    esac
done
P="$build/tools/packdata/packdata"
[[ -x $P ]] || { echo "pack_tar: $P not built (pass --build DIR)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "pack_tar: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
mkdir -p "$work"

# ---- the data: a folder and the same as a tar of per-class tars ----
stamp="$work/.made-$classes-$per_class"
if [[ ! -f $stamp ]]; then
    rm -rf "$work/train" "$work/train.tar"
    echo "pack_tar: making $((classes * per_class)) JPEGs in $work/train and $work/train.tar ..."
    /usr/bin/python3 - "$work" "$classes" "$per_class" <<'EOF'
import io, os, random, sys, tarfile
from multiprocessing import Pool
from PIL import Image
work, classes, per_class = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
base = "/usr/lib/python3/dist-packages/skimage/data"
names = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png", "rocket.jpg",
         "hubble_deep_field.jpg", "retina.jpg", "ihc.png"]
photos = []
for n in names:
    try:
        photos.append(Image.open(os.path.join(base, n)).convert("RGB"))
    except OSError:
        pass
if len(photos) < 3:
    sys.exit("pack_tar: too few photographs (apt-get install python3-skimage)")
wnids = [f"n{10000000 + 7919 * c:08d}" for c in range(classes)]

def make_class(c):
    rng = random.Random(c)
    wnid = wnids[c]
    d = os.path.join(work, "train", wnid)
    os.makedirs(d, exist_ok=True)
    cast = [rng.uniform(0.7, 1.3) for _ in range(3)]
    out = []
    for k in range(per_class):
        src = photos[rng.randrange(len(photos))]
        sw, sh = src.size
        cw = rng.randint(max(16, sw // 8), sw // 2)
        ch = min(sh, max(16, int(cw * rng.uniform(0.75, 1.33))))
        x, y = rng.randint(0, sw - cw), rng.randint(0, sh - ch)
        side = rng.randint(40, 96)
        img = src.crop((x, y, x + cw, y + ch)).resize((side, max(8, side * ch // cw)), Image.BILINEAR)
        img = Image.merge("RGB", [b.point(lambda v, f=f: min(255, int(v * f))) for b, f in zip(img.split(), cast)])
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=85)
        name = f"{wnid}_{k}.JPEG"
        with open(os.path.join(d, name), "wb") as f:
            f.write(buf.getvalue())
        out.append(name)
    # the per-class tar, in memory (as ImageNet's: flat names)
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w") as t:
        for name in out:
            t.add(os.path.join(d, name), arcname=name)
    return wnid, bio.getvalue()

with Pool(2) as pool, tarfile.open(os.path.join(work, "train.tar.tmp"), "w") as outer:
    for wnid, data in pool.imap(make_class, range(classes), chunksize=4):
        ti = tarfile.TarInfo(wnid + ".tar")
        ti.size = len(data)
        outer.addfile(ti, io.BytesIO(data))
os.rename(os.path.join(work, "train.tar.tmp"), os.path.join(work, "train.tar"))
EOF
    touch "$stamp"
fi
n_files=$((classes * per_class))
echo "pack_tar: $n_files JPEGs, folder $(du -sm "$work/train" | cut -f1) MB, tar $(($(stat -c %s "$work/train.tar") >> 20)) MB; load $(cut -d' ' -f1-3 /proc/loadavg)"
# warm the page cache for both
cat "$work/train.tar" >/dev/null
find "$work/train" -type f -exec cat {} + >/dev/null

# one dataset id for both, so their shards can be compared byte for byte
export FL_DATASET_ID=0123456789abcdef0123456789abcdef
one() { # SRC LABEL -> "rate rss_mb images_per_cpu_second"
    local src=$1 dst="$work/out-$2"
    rm -rf "$dst" "$dst.partial"
    /usr/bin/time -v -o "$work/time-$2" "$P" pack "$src" "$dst" --json "${extra[@]}" >"$work/json-$2" 2>"$work/err-$2" ||
        { echo "pack_tar: packing $src failed:" >&2; tail -3 "$work/err-$2" >&2; exit 1; }
    local rate rss
    rate=$(/usr/bin/python3 -c 'import json,sys; print("%.0f" % json.load(open(sys.argv[1]))["images_per_second"])' "$work/json-$2")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.1f", $2 / 1024}' "$work/time-$2")
    # images per CPU-second (user + sys): steadier than wall-clock rates when others share the cores
    cpu=$(awk -F': ' -v n="$n_files" '/User time|System time/ {t += $2} END {printf "%.0f", n / t}' "$work/time-$2")
    echo "$rate $rss $cpu"
}

tar_rates=() dir_rates=() tar_rss=() dir_rss=() ratios=() cpu_ratios=()
for ((r = 1; r <= runs; r++)); do
    if ((r % 2)); then
        t=$(one "$work/train.tar" tar); d=$(one "$work/train" dir)
    else
        d=$(one "$work/train" dir); t=$(one "$work/train.tar" tar)
    fi
    read -r tr tm tc <<<"$t"
    read -r dr dm dc <<<"$d"
    tar_rates+=("$tr"); dir_rates+=("$dr"); tar_rss+=("$tm"); dir_rss+=("$dm")
    ratios+=("$(awk -v a="$tr" -v b="$dr" 'BEGIN {printf "%.3f", a / b}')")
    cpu_ratios+=("$(awk -v a="$tc" -v b="$dc" 'BEGIN {printf "%.3f", a / b}')")
    echo "round $r: tar $tr img/s ($tc per CPU-s, peak RSS $tm MB), folder $dr img/s ($dc per CPU-s, peak RSS $dm MB), ratio ${ratios[-1]}x (per CPU-s ${cpu_ratios[-1]}x); load $(cut -d' ' -f1 /proc/loadavg)"
done
same=yes
[[ "$(ls "$work/out-tar")" == "$(ls "$work/out-dir")" ]] || same=no
for f in "$work/out-dir"/shard-*; do cmp -s "$f" "$work/out-tar/$(basename "$f")" || same=no; done
echo "same shards, byte for byte, from the tar and from the folder: $same"
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
mr=$(med "${ratios[@]}")
mt=$(med "${tar_rss[@]}")
echo "median: tar $(med "${tar_rates[@]}") img/s, folder $(med "${dir_rates[@]}") img/s, ratio ${mr}x (target >= 1.0x): $(awk -v r="$mr" 'BEGIN {print (r >= 1.0) ? "met" : "missed"}')"
echo "median images per CPU-second ratio tar/folder: $(med "${cpu_ratios[@]}")x"
echo "median peak RSS: tar pack $mt MB (target < 200 MB): $(awk -v m="$mt" 'BEGIN {print (m < 200) ? "met" : "missed"}'), folder pack $(med "${dir_rss[@]}") MB"
