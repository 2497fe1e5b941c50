"""fields_data.py — detection and segmentation inputs drawn on real photographs (python3-skimage's
sample photos, through bench/make_photos.py), for the end-to-end field tests and the examples.

  coco(out, count, size=(W, H) | None, seed)
      out/images/NNNNNN.jpg + out/instances.json (COCO instances): 1-4 objects per image, each of
      another category (so an image's semantic mask tells its objects apart: the pixels of value
      label + 1 are exactly that object's visible part), drawn as a filled shape of the
      category's colour and form (a later object hides an earlier one where they overlap); each
      annotation's segmentation is the compressed RLE of its visible pixels (exact), its bbox their
      extent. out/masks/NNNNNN.png: the same semantic masks (0 background, category index + 1),
      so the folder pair out/images + out/masks is a segmentation set too. size=None: sizes vary.
  Run as a script: fields_data.py coco OUT [--count N] [--size W H] [--seed S]
Needs /usr/bin/python3 (PIL, numpy, skimage's photos)."""
import argparse
import json
import os
import random
import sys

import numpy as np
from PIL import Image, ImageDraw

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
sys.path.insert(0, os.path.join(_ROOT, "tests", "packdata"))
sys.path.insert(0, os.path.join(_ROOT, "bench"))
from coco_ref import rle_to_string  # noqa: E402
from make_photos import find_photos  # noqa: E402

# category: (name, colour, shape) — each category has a colour and a form, so it can be learnt
CATEGORIES = [("red_box", (220, 40, 40), "rect"), ("green_disc", (40, 200, 60), "ellipse"),
              ("blue_triangle", (40, 70, 230), "triangle"), ("yellow_diamond", (235, 215, 40), "diamond"),
              ("white_disc", (245, 245, 245), "ellipse")]


def rle_counts(mask):
    """bool [h, w] -> uncompressed COCO RLE counts (column-major, zeros first): coco_ref.rle_encode
    with numpy."""
    flat = mask.T.reshape(-1).astype(np.int8)
    change = np.flatnonzero(np.diff(flat)) + 1
    edges = np.concatenate([[0], change, [flat.size]])
    counts = np.diff(edges).tolist()
    return ([0] + counts) if flat.size and flat[0] else counts


def _shape(draw, kind, x0, y0, w, h):
    x1, y1 = x0 + w - 1, y0 + h - 1
    if kind == "rect":
        draw.rectangle([x0, y0, x1, y1], fill=255)
    elif kind == "ellipse":
        draw.ellipse([x0, y0, x1, y1], fill=255)
    elif kind == "triangle":
        draw.polygon([(x0 + w / 2, y0), (x1, y1), (x0, y1)], fill=255)
    else:
        draw.polygon([(x0 + w / 2, y0), (x1, y0 + h / 2), (x0 + w / 2, y1), (x0, y0 + h / 2)], fill=255)


def _background(photos, rng, W, H):
    _, src = photos[rng.randrange(len(photos))]
    sw, sh = src.size
    frac = rng.uniform(0.4, 1.0)
    cw, ch = min(sw, max(16, int(sw * frac))), min(sh, max(16, int(sw * frac * H / W)))
    x, y = rng.randint(0, sw - cw), rng.randint(0, sh - ch)
    im = src.crop((x, y, x + cw, y + ch))
    if rng.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    return im.resize((W, H), Image.BILINEAR)


def coco(out, count, size=None, seed=0, quality=90, round_shapes=False):
    """Write the set (see the module's doc); returns the number of objects. round_shapes: draw
    every category as a rectangle or an ellipse (no pointed tips: a tip thinner than the source
    pixels one output pixel spans vanishes under any nearest-neighbour downscale, so its mask's
    extent would fall short of its box by more than a pixel)."""
    rng = random.Random(seed)
    photos = find_photos()
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    os.makedirs(os.path.join(out, "masks"), exist_ok=True)
    images, anns = [], []
    for n in range(count):
        W, H = size if size else (rng.randrange(160, 400), rng.randrange(120, 320))
        im = _background(photos, rng, W, H)
        inst = np.zeros((H, W), np.int32)  # object index + 1, later objects on top
        cats = rng.sample(range(len(CATEGORIES)), rng.randint(1, 4))
        for j, c in enumerate(cats):
            w = rng.randint(max(8, W // 8), max(9, W * 2 // 5))
            h = rng.randint(max(8, H // 8), max(9, H * 2 // 5))
            x0, y0 = rng.randint(0, W - w), rng.randint(0, H - h)
            layer = Image.new("L", (W, H), 0)
            kind = CATEGORIES[c][2]
            if round_shapes and kind not in ("rect", "ellipse"):
                kind = "rect" if c % 2 else "ellipse"
            _shape(ImageDraw.Draw(layer), kind, x0, y0, w, h)
            m = np.asarray(layer) > 0
            inst[m] = j + 1
            colour = tuple(min(255, max(0, v + rng.randint(-25, 25))) for v in CATEGORIES[c][1])
            im.paste(Image.new("RGB", (W, H), colour), (0, 0), layer)
        sem = np.zeros((H, W), np.uint8)
        name = f"{n:06d}"
        for j, c in enumerate(cats):
            m = inst == j + 1
            if not m.any():
                continue  # wholly hidden by later objects: no annotation
            ys, xs = np.nonzero(m)
            sem[m] = c + 1
            anns.append({"id": len(anns) + 1, "image_id": n + 1, "category_id": c + 1,
                         "bbox": [float(xs.min()), float(ys.min()), float(xs.max() + 1 - xs.min()),
                                  float(ys.max() + 1 - ys.min())],
                         "area": float(m.sum()), "iscrowd": 0,
                         "segmentation": {"size": [H, W], "counts": rle_to_string(rle_counts(m))}})
        im.save(os.path.join(out, "images", name + ".jpg"), quality=quality)
        Image.fromarray(sem).save(os.path.join(out, "masks", name + ".png"))
        images.append({"id": n + 1, "file_name": name + ".jpg", "width": W, "height": H})
    cats_json = [{"id": i + 1, "name": c[0]} for i, c in enumerate(CATEGORIES)]
    with open(os.path.join(out, "instances.json"), "w") as f:
        json.dump({"images": images, "annotations": anns, "categories": cats_json}, f)
    return len(anns)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["coco"])
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=64)
    ap.add_argument("--size", type=int, nargs=2, metavar=("W", "H"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    k = coco(a.out, a.count, tuple(a.size) if a.size else None, a.seed)
    print(f"fields_data.py: {a.count} images, {k} objects in {a.out}")


if __name__ == "__main__":
    main()
