#!/usr/bin/python3
"""make_photos.py — make a folder of photo-like JPEGs from the real photographs Debian ships
(python3-skimage's sample photos), for the packdata and loader benchmarks.

Each output image is a random crop (random position, 35–100% of the source side, random flip) of
one of the colour photographs, resized so its area is near --mean-pixels (aspect ratio kept, ±25%
size jitter), saved as a baseline 4:2:0 JPEG at --quality. The layout is ImageFolder: one
sub-folder per source photograph (the class). Deterministic for a given --seed.

Usage: /usr/bin/python3 bench/make_photos.py OUT_DIR [--count 2000] [--mean-pixels 200000]
       [--quality 90] [--seed 0]
"""
import argparse
import os
import random
import sys

try:
    from PIL import Image
except ImportError:
    sys.exit("make_photos.py: needs PIL (Debian's python3-pil, run with /usr/bin/python3)")

PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
          "motorcycle_right.png", "rocket.jpg", "hubble_deep_field.jpg", "retina.jpg", "ihc.png"]


def find_photos():
    try:
        import skimage.data
        base = os.path.dirname(skimage.data.__file__)
    except ImportError:
        base = "/usr/lib/python3/dist-packages/skimage/data"
    found = []
    for name in PHOTOS:
        path = os.path.join(base, name)
        try:
            img = Image.open(path)
            img.load()
            found.append((os.path.splitext(name)[0], img.convert("RGB")))
        except OSError:
            pass
    if len(found) < 3:
        sys.exit(f"make_photos.py: too few photographs under {base} (apt-get install python3-skimage)")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--mean-pixels", type=int, default=200000)
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    photos = find_photos()
    total_px = 0
    for i in range(a.count):
        cls, src = photos[i % len(photos)]
        sw, sh = src.size
        frac = rng.uniform(0.35, 1.0)
        cw, ch = max(16, int(sw * frac)), max(16, int(sh * frac * rng.uniform(0.8, 1.25)))
        cw, ch = min(cw, sw), min(ch, sh)
        x, y = rng.randint(0, sw - cw), rng.randint(0, sh - ch)
        crop = src.crop((x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        target = a.mean_pixels * rng.uniform(0.75, 1.25)
        scale = (target / (cw * ch)) ** 0.5
        ow, oh = max(8, round(cw * scale)), max(8, round(ch * scale))
        img = crop.resize((ow, oh), Image.BILINEAR)
        d = os.path.join(a.out, cls)
        os.makedirs(d, exist_ok=True)
        img.save(os.path.join(d, f"{i:06d}.jpg"), quality=a.quality, subsampling=2)
        total_px += ow * oh
    print(f"make_photos: {a.count} JPEGs in {a.out}, {len(photos)} classes, "
          f"mean {total_px / a.count / 1e6:.3f} megapixels")


if __name__ == "__main__":
    main()
