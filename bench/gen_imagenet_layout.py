#!/usr/bin/python3
"""gen_imagenet_layout.py — make an ImageNet-1k-shaped ImageFolder source for the scale benchmark
(bench/imagenet_scale.sh): 1,000 class folders named like WordNet ids (n00000000 ...), files named
<wnid>_<k>.JPEG, 1,281,167 files in all by default with ImageNet's per-class structure (most classes
1,300 images, a minority between 732 and 1,299), so a listing, a plan and an index see the real
file and class counts.

Each image is a small baseline 4:2:0 JPEG (--min-side..--max-side pixels a side, --quality) cut from
one of the real photographs Debian ships (python3-skimage's sample photos): a random crop, a random
flip, and a per-class colour cast with a per-image jitter, so no two files are the same bytes and
classes differ in colour. A few GB at the default sizes. Deterministic for a --seed whatever
--jobs is (each class has its own random stream). Classes already complete (all files present) are
skipped, so an interrupted run continues where it stopped.

--total N scales the per-class counts by N / 1,281,167 (e.g. --total 128117 for a tenth).

Usage: /usr/bin/python3 bench/gen_imagenet_layout.py OUT_DIR [--total 1281167] [--classes 1000]
       [--min-side 32] [--max-side 64] [--quality 75] [--seed 0] [--jobs 2]
"""
import argparse
import io
import multiprocessing
import os
import random
import sys
import time

try:
    from PIL import Image
except ImportError:
    sys.exit("gen_imagenet_layout.py: needs PIL (Debian's python3-pil, run with /usr/bin/python3)")

IMAGENET_TOTAL = 1281167
FULL, SHORTEST = 1300, 732
PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
          "motorcycle_right.png", "rocket.jpg", "hubble_deep_field.jpg", "retina.jpg", "ihc.png"]


def class_counts(classes, total, seed):
    """ImageNet-1k-like counts: full classes of 1,300 and short ones (732..1,299) taking the deficit;
    scaled to `total` and made to sum to it exactly."""
    rng = random.Random(seed * 7919 + 1)
    counts = [FULL] * classes
    deficit = FULL * classes - IMAGENET_TOTAL * classes // 1000
    order = list(range(classes))
    rng.shuffle(order)
    for c in order:
        if deficit <= 0:
            break
        cut = min(deficit, rng.randint(1, FULL - SHORTEST))
        counts[c] -= cut
        deficit -= cut
    full_sum = sum(counts)
    scaled = [max(1, round(n * total / full_sum)) for n in counts]
    diff = total - sum(scaled)
    i = 0
    while diff != 0:
        c = order[i % classes]
        step = 1 if diff > 0 else -1
        if scaled[c] + step >= 1:
            scaled[c] += step
            diff -= step
        i += 1
    return scaled


def load_photos():
    try:
        import skimage.data
        base = os.path.dirname(skimage.data.__file__)
    except ImportError:
        base = "/usr/lib/python3/dist-packages/skimage/data"
    found = []
    for name in PHOTOS:
        try:
            img = Image.open(os.path.join(base, name))
            img.load()
        except OSError:
            continue
        img = img.convert("RGB")
        # crops are at most 64 px: a 320 px copy keeps the crops' detail and makes each resize cheap
        s = 320 / max(img.size)
        if s < 1:
            img = img.resize((max(1, round(img.width * s)), max(1, round(img.height * s))), Image.LANCZOS)
        found.append(img)
    if len(found) < 3:
        sys.exit(f"gen_imagenet_layout.py: too few photographs under {base} (apt-get install python3-skimage)")
    return found


def wnid(c):
    return "n%08d" % (1000000 + c * 1117)


def make_class(args):
    out, c, count, a = args
    d = os.path.join(out, wnid(c))
    os.makedirs(d, exist_ok=True)
    done_mark = os.path.join(d, ".complete")
    if os.path.exists(done_mark):
        return count, 0
    photos = PHOTOS_LOADED
    rng = random.Random((a.seed << 20) ^ (c * 2654435761))
    cast = [rng.uniform(0.6, 1.4) for _ in range(3)]
    # the per-image jitter is one of 16 precomputed lookup tables (a table per image would cost more
    # than the JPEG encode)
    luts = []
    for _ in range(16):
        gains = [g * rng.uniform(0.9, 1.1) for g in cast]
        luts.append([min(255, int(v * g)) for g in gains for v in range(256)])
    nbytes = 0
    for k in range(count):
        src = photos[(c + rng.randrange(3)) % len(photos)]
        sw, sh = src.size
        w = rng.randint(a.min_side, a.max_side)
        h = max(a.min_side, min(a.max_side, round(w * rng.uniform(0.75, 1.33))))
        frac = rng.uniform(0.2, 1.0)
        cw = max(8, round(sw * frac))
        ch = max(8, min(sh, round(cw * h / w)))
        cw = min(cw, sw)
        x0 = rng.randrange(sw - cw + 1)
        y0 = rng.randrange(sh - ch + 1)
        img = src.resize((w, h), Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + ch))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        img = img.point(luts[rng.randrange(16)])
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=a.quality)
        data = buf.getvalue()
        with open(os.path.join(d, "%s_%d.JPEG" % (wnid(c), k + 1)), "wb") as f:
            f.write(data)
        nbytes += len(data)
    open(done_mark, "w").close()
    return count, nbytes


PHOTOS_LOADED = None


def init_worker():
    global PHOTOS_LOADED
    PHOTOS_LOADED = load_photos()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--total", type=int, default=IMAGENET_TOTAL)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--min-side", type=int, default=32)
    ap.add_argument("--max-side", type=int, default=64)
    ap.add_argument("--quality", type=int, default=75)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    if a.total < a.classes or a.classes < 1 or not 8 <= a.min_side <= a.max_side:
        sys.exit("gen_imagenet_layout.py: need --total >= --classes >= 1 and 8 <= --min-side <= --max-side")
    counts = class_counts(a.classes, a.total, a.seed)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    files = nbytes = 0
    work = [(a.out, c, counts[c], a) for c in range(a.classes)]
    with multiprocessing.Pool(a.jobs, initializer=init_worker) as pool:
        for i, (n, b) in enumerate(pool.imap_unordered(make_class, work, chunksize=4)):
            files += n
            nbytes += b
            if (i + 1) % 100 == 0:
                print(f"gen_imagenet_layout: {i + 1}/{a.classes} classes, {files} files, "
                      f"{time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    # the per-class .complete marks stay: packdata's ImageFolder source skips dot files
    print(f"gen_imagenet_layout: {a.out}: {a.classes} classes, {sum(counts)} files "
          f"({nbytes / 1e6:.1f} MB of JPEG written this run, min {min(counts)} max {max(counts)} per class), "
          f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
