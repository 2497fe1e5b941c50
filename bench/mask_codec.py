#!/usr/bin/python3
"""mask_codec.py — a VOC-like segmentation set for bench/mask_codec.sh.

  voc OUT [--count 300] [--seed 0]
      OUT/JPEGImages/*.jpg: photo-like JPEGs at VOC's size (500 x 375 or 375 x 500, random crops of
      Debian's sample photographs through bench/make_photos.py) and OUT/SegmentationClass/*.png:
      palette PNGs as VOC ships them — 1-4 objects (ellipses and polygons of 20 classes, later
      ones painting over earlier ones), each outlined by VOC's 5-pixel "void" border (index 255).
"""
import argparse
import os
import random
import subprocess
import sys

from PIL import Image, ImageDraw


def voc(a):
    here = os.path.dirname(os.path.abspath(__file__))
    photos = os.path.join(a.out, "photos")
    if not os.path.isdir(photos):
        subprocess.run([sys.executable, os.path.join(here, "make_photos.py"), photos, "--count",
                        str(a.count), "--mean-pixels", "187500", "--seed", str(a.seed)], check=True)
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(photos) for f in fs if f.endswith(".jpg"))
    os.makedirs(f"{a.out}/JPEGImages", exist_ok=True)
    os.makedirs(f"{a.out}/SegmentationClass", exist_ok=True)
    pal = [0] * 768
    for i in range(256):  # VOC's bit-interleaved colour map
        r = g = b = 0
        c = i
        for k in range(8):
            r |= ((c >> 0) & 1) << (7 - k)
            g |= ((c >> 1) & 1) << (7 - k)
            b |= ((c >> 2) & 1) << (7 - k)
            c >>= 3
        pal[3 * i:3 * i + 3] = [r, g, b]
    rng = random.Random(a.seed)
    for j, f in enumerate(files[:a.count]):
        size = (500, 375) if rng.random() < 0.7 else (375, 500)
        im = Image.open(f).convert("RGB").resize(size, Image.BILINEAR)
        w, h = size
        m = Image.new("P", size, 0)
        d = ImageDraw.Draw(m)
        for _ in range(rng.randint(1, 4)):
            cls = rng.randint(1, 20)
            x0, y0 = rng.randint(0, w - 60), rng.randint(0, h - 60)
            x1, y1 = rng.randint(x0 + 40, min(w - 1, x0 + 300)), rng.randint(y0 + 40, min(h - 1, y0 + 300))
            if rng.random() < 0.5:
                d.ellipse([x0, y0, x1, y1], fill=cls, outline=255, width=5)
            else:
                pts = [(rng.randint(x0, x1), rng.randint(y0, y1)) for _ in range(rng.randint(3, 7))]
                d.polygon(pts, fill=cls)
                d.line(pts + pts[:1], fill=255, width=5)
        m.putpalette(pal)
        name = f"2007_{j:06d}"
        im.save(f"{a.out}/JPEGImages/{name}.jpg", quality=90)
        m.save(f"{a.out}/SegmentationClass/{name}.png")
    print(f"mask_codec.py: {min(a.count, len(files))} VOC-like pairs in {a.out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("voc")
    v.add_argument("out")
    v.add_argument("--count", type=int, default=300)
    v.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    voc(a)


if __name__ == "__main__":
    main()
