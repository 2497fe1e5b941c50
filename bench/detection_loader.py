#!/usr/bin/python3
"""detection_loader.py — the detection set of bench/detection_loader.sh and its PyTorch peer.

  make OUT [--count 600] [--seed 0]
      Photo-like JPEGs (bench/make_photos.py's crops of Debian's sample photographs, ~140k pixels)
      with 1-6 objects drawn on each (filled ellipses and rectangles of random colour, disjoint
      where they overlap: a later object paints over an earlier one, whose box is then its visible
      extent), written as a COCO instances file OUT/instances.json (bbox, polygon segmentation,
      category_id of 5 categories, iscrowd 0) over OUT/images/, plus the semantic masks
      (0 background, category index + 1) as 8-bit PNGs in OUT/masks/ for the peer.
  torch ROOT [--workers 2] [--batch 32] [--size 320] [--epochs 1]
      What a user writes with PyTorch: a Dataset reading instances.json once, then per sample PIL
      decode of the JPEG and of its mask PNG, RandomResizedCrop parameters (torchvision's
      get_params), the image resized bilinear and the mask nearest through the crop, a coin flip
      mirroring both, boxes transformed with numpy (shift, scale, clip, drop boxes with < 1 px
      left, flip) with their labels; collated into uint8 [B,S,S,3] images, uint8 [B,S,S] masks,
      float32 [B,M,4] boxes padded with zeros and int32 counts — the same output fastload gives.
      DataLoader with num_workers workers, persistent; times E epochs from the first iter() and
      prints one JSON object (images_per_sec, images, seconds, workers, batch_size, size).
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

import numpy as np
from PIL import Image, ImageDraw

CATS = ["disc", "block", "ring", "bar", "blob"]


def make(a):
    here = os.path.dirname(os.path.abspath(__file__))
    photos = os.path.join(a.out, "photos")
    if not os.path.isdir(photos):
        subprocess.run([sys.executable, os.path.join(here, "make_photos.py"), photos, "--count",
                        str(a.count), "--mean-pixels", "140000", "--seed", str(a.seed)],
                       check=True, stdout=subprocess.DEVNULL)
    os.makedirs(os.path.join(a.out, "images"), exist_ok=True)
    os.makedirs(os.path.join(a.out, "masks"), exist_ok=True)
    rng = random.Random(a.seed)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(photos) for f in fs
                   if f.lower().endswith(".jpg"))
    images, anns = [], []
    for n, src in enumerate(files):
        im = Image.open(src).convert("RGB")
        W, H = im.size
        inst = np.zeros((H, W), np.int32)  # object index + 1, later objects on top
        objs = []
        for j in range(rng.randint(1, 6)):
            w = rng.randint(max(8, W // 12), max(9, W // 3))
            h = rng.randint(max(8, H // 12), max(9, H // 3))
            x0, y0 = rng.randint(0, W - w), rng.randint(0, H - h)
            cat = rng.randrange(len(CATS))
            layer = Image.new("L", (W, H), 0)
            d = ImageDraw.Draw(layer)
            if j % 2:
                d.ellipse([x0, y0, x0 + w - 1, y0 + h - 1], fill=255)
            else:
                d.rectangle([x0, y0, x0 + w - 1, y0 + h - 1], fill=255)
            m = np.asarray(layer) > 0
            inst[m] = j + 1
            colour = tuple(rng.randrange(256) for _ in range(3))
            im.paste(Image.new("RGB", (W, H), colour), (0, 0), layer)
            objs.append((cat, j % 2, (x0, y0, w, h)))
        sem = np.zeros((H, W), np.uint8)
        name = f"{n:06d}.jpg"
        for j, (cat, ell, (x0, y0, w, h)) in enumerate(objs):
            m = inst == j + 1
            if not m.any():
                continue
            ys, xs = np.nonzero(m)
            bx0, by0, bx1, by1 = xs.min(), ys.min(), xs.max() + 1, ys.max() + 1
            sem[m] = cat + 1
            # the visible region's outline as a polygon is what a COCO file would hold; its
            # bounding rectangle suffices here (the mask PNG carries the exact pixels)
            poly = [float(bx0), float(by0), float(bx1), float(by0), float(bx1), float(by1),
                    float(bx0), float(by1)]
            anns.append({"id": len(anns) + 1, "image_id": n + 1, "category_id": cat + 1,
                         "bbox": [float(bx0), float(by0), float(bx1 - bx0), float(by1 - by0)],
                         "area": float(m.sum()), "iscrowd": 0, "segmentation": [poly]})
        im.save(os.path.join(a.out, "images", name), quality=90)
        Image.fromarray(sem).save(os.path.join(a.out, "masks", name[:-4] + ".png"))
        images.append({"id": n + 1, "file_name": name, "width": W, "height": H})
    coco = {"images": images, "annotations": anns,
            "categories": [{"id": i + 1, "name": c} for i, c in enumerate(CATS)]}
    with open(os.path.join(a.out, "instances.json"), "w") as f:
        json.dump(coco, f)
    print(f"detection_loader.py: {len(images)} images, {len(anns)} objects in {a.out}")


def rrc_params(W, H, rng, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision.transforms.RandomResizedCrop.get_params, with a numpy-free RNG."""
    area = W * H
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*scale)
        ar = math.exp(rng.uniform(*lr))
        w = int(round(math.sqrt(target * ar)))
        h = int(round(math.sqrt(target / ar)))
        if 0 < w <= W and 0 < h <= H:
            return rng.randint(0, W - w), rng.randint(0, H - h), w, h
    r = W / H
    if r < ratio[0]:
        w, h = W, int(round(W / ratio[0]))
    elif r > ratio[1]:
        h, w = H, int(round(H * ratio[1]))
    else:
        w, h = W, H
    return (W - w) // 2, (H - h) // 2, w, h


class CocoDetection:
    def __init__(self, root, size, max_boxes):
        import torch  # noqa: F401  (the worker processes need it importable)
        with open(os.path.join(root, "instances.json")) as f:
            coco = json.load(f)
        self.root, self.size, self.M = root, size, max_boxes
        self.images = coco["images"]
        cat_index = {c["id"]: i for i, c in enumerate(sorted(coco["categories"], key=lambda c: c["id"]))}
        per = {im["id"]: [] for im in self.images}
        for a in coco["annotations"]:
            x, y, w, h = a["bbox"]
            per[a["image_id"]].append((x, y, x + w, y + h, cat_index[a["category_id"]]))
        self.anns = [per[im["id"]] for im in self.images]
        self.rng = random.Random()

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        im = self.images[i]
        img = Image.open(os.path.join(self.root, "images", im["file_name"])).convert("RGB")
        mask = Image.open(os.path.join(self.root, "masks", im["file_name"][:-4] + ".png"))
        W, H = img.size
        x, y, w, h = rrc_params(W, H, self.rng)
        S = self.size
        img = img.resize((S, S), Image.BILINEAR, box=(x, y, x + w, y + h))
        mask = mask.resize((S, S), Image.NEAREST, box=(x, y, x + w, y + h))
        a = np.asarray(self.anns[i], np.float32).reshape(-1, 5)
        b = a[:, :4].copy()
        b[:, [0, 2]] = (b[:, [0, 2]] - x) * S / w
        b[:, [1, 3]] = (b[:, [1, 3]] - y) * S / h
        inside = (b[:, 0] >= 0) & (b[:, 1] >= 0) & (b[:, 2] <= S) & (b[:, 3] <= S)
        b = np.clip(b, 0, S)
        keep = inside | ((b[:, 2] - b[:, 0] >= 1) & (b[:, 3] - b[:, 1] >= 1))
        b, labels = b[keep], a[keep, 4].astype(np.int32)
        if self.rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
            mask = mask.transpose(Image.FLIP_LEFT_RIGHT)
            b[:, [0, 2]] = S - b[:, [2, 0]]
        boxes = np.zeros((self.M, 4), np.float32)
        lab = np.zeros(self.M, np.int32)
        n = min(len(b), self.M)
        boxes[:n], lab[:n] = b[:n], labels[:n]
        return np.array(img), np.array(mask), boxes, lab, n


def run_torch(a):
    import torch
    torch.set_num_threads(1)
    ds = CocoDetection(a.root, a.size, a.max_boxes)

    def init(wid):
        ds.rng.seed(torch.initial_seed() % 2**32)

    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                     persistent_workers=a.workers > 0, drop_last=False,
                                     worker_init_fn=init)
    t0 = time.perf_counter()
    n = 0
    for _ in range(a.epochs):
        for img, mask, boxes, lab, cnt in dl:
            n += img.shape[0]
    dt = time.perf_counter() - t0
    print(json.dumps({"images_per_sec": n / dt, "images": n, "seconds": dt, "workers": a.workers,
                      "batch_size": a.batch, "size": a.size}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--count", type=int, default=600)
    m.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("torch")
    t.add_argument("root")
    t.add_argument("--workers", type=int, default=2)
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--size", type=int, default=320)
    t.add_argument("--epochs", type=int, default=1)
    t.add_argument("--max-boxes", type=int, default=6)
    a = ap.parse_args()
    make(a) if a.cmd == "make" else run_torch(a)


if __name__ == "__main__":
    main()
