"""fields_check.py MODE ... — compare what `packdata extract` wrote for every record of a packed
set with the sources read the plain way (json + PIL + numpy). Prints one line per mismatch and
exits 1 when there is any. Run with /usr/bin/python3.

  coco INSTANCES ROOT EXDIR N [--masks]
      EXDIR/r<i>.json/.jpg/.mask.png of records 0..N-1 against coco_ref.read_coco: the same images
      (bytes of the kept file), boxes (float32, exact), labels, iscrowd and semantic masks (every
      pixel); every COCO image exactly once; without --masks no mask file
  pairs IMAGE_DIR MASK_DIR EXDIR N IMG_SUFFIX MASK_SUFFIX
      mask pairs: each record's mask PNG holds the source mask's class ids (palette indices for
      VOC's palette PNGs, gray values for Cityscapes' labelIds), its image the source's bytes
  table JSONL EXDIR N
      CSV/JSONL --field values: label, int, float, int_list, float_vector, boxes, ndarray (.npy
      path or nested list), bytes, text, mask, each equal to the row's"""
import json
import os
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from coco_ref import read_coco  # noqa: E402

bad = []


def check(cond, what):
    if not cond:
        bad.append(what)


def rec(exdir, i):
    return json.load(open(f"{exdir}/r{i}.json"))


def coco(inst, root, exdir, n, masks):
    ref, classes = read_coco(inst, root, masks=masks)
    by_name = {r["file"]: r for r in ref}
    check(n == len(ref), f"{n} records, the COCO file has {len(ref)} images")
    seen = set()
    for i in range(n):
        j = rec(exdir, i)
        name = j["name"]
        r = by_name.get(name)
        if r is None:
            bad.append(f"record {i}: {name} is not a COCO image")
            continue
        seen.add(name)
        img = open(f"{exdir}/{j['image']}", "rb").read()
        check(img == open(f"{root}/{name}", "rb").read(), f"record {i} {name}: image bytes differ")
        boxes = np.array(j["boxes"], dtype=np.float32).reshape(-1, 4)
        check(boxes.shape == r["boxes"].shape and np.array_equal(boxes, r["boxes"]),
              f"record {i} {name}: boxes {boxes.tolist()} != {r['boxes'].tolist()}")
        check(j["labels"] == r["labels"].tolist(), f"record {i} {name}: labels {j['labels']} != {r['labels'].tolist()}")
        check(j["iscrowd"] == r["iscrowd"].tolist(), f"record {i} {name}: iscrowd {j['iscrowd']} != {r['iscrowd'].tolist()}")
        check(j["height"] == r["image"].shape[0] and j["width"] == r["image"].shape[1],
              f"record {i} {name}: size {j['width']}x{j['height']}")
        if masks:
            mf = f"{exdir}/{j['mask']}"
            m = np.asarray(Image.open(mf))
            depth = open(mf, "rb").read(25)[24]  # IHDR bit depth: 8 for uint8, 16 for uint16
            diff = int((m != r["mask"]).sum()) if m.shape == r["mask"].shape else -1
            check(diff == 0 and depth == 8 * r["mask"].itemsize,
                  f"record {i} {name}: mask differs in {diff} pixels (shape {m.shape}, {depth}-bit PNG)")
        else:
            check("mask" not in j, f"record {i} {name}: a mask without --masks")
    check(len(seen) == len(ref), f"{len(ref) - len(seen)} COCO images not packed")


def pairs(img_dir, mask_dir, exdir, n, img_suffix, mask_suffix):
    want = {}
    for dp, _, fs in os.walk(mask_dir):
        for f in fs:
            if f.endswith(mask_suffix):
                rel = os.path.relpath(os.path.join(dp, f), mask_dir)
                want[rel[: -len(mask_suffix)]] = os.path.join(dp, f)
    check(n == len(want), f"{n} records, {len(want)} masks")
    for i in range(n):
        j = rec(exdir, i)
        stem = None
        for s in want:
            if j["name"].startswith(s) and j["name"][len(s):] in (img_suffix, ".jpg", ".png"):
                stem = s
        if stem is None:
            bad.append(f"record {i}: {j['name']} pairs with no mask")
            continue
        src = np.asarray(Image.open(want.pop(stem)))  # palette images give their indices
        m = np.asarray(Image.open(f"{exdir}/{j['mask']}"))
        check(m.shape == src.shape and np.array_equal(m, src), f"record {i} {j['name']}: mask differs")
        img = open(f"{exdir}/{j['image']}", "rb").read()
        check(img == open(f"{img_dir}/{j['name']}", "rb").read(), f"record {i}: image bytes differ")
    check(not want, f"masks not packed: {sorted(want)}")


def table(jsonl, exdir, n):
    rows = [json.loads(line) for line in open(jsonl)]
    base = os.path.dirname(jsonl)
    check(n == len(rows), f"{n} records, {len(rows)} rows")
    f32 = lambda v: np.float32(v).item()  # noqa: E731
    for i in range(n):
        j, r = rec(exdir, i), rows[i]
        w = f"record {i} ({r['path']})"
        check(j["name"] == r["path"], f"{w}: name {j['name']}")
        check(j["label"] == r["label"], f"{w}: label")
        check(j["count"] == r["count"], f"{w}: int")
        check(j["score"] == f32(r["score"]), f"{w}: float {j['score']}")
        check(j["tags"] == r["tags"], f"{w}: int_list {j['tags']}")
        check(j["emb"] == [f32(v) for v in r["emb"]], f"{w}: float_vector {j['emb']}")
        check(j["boxes"] == [[f32(v) for v in b] for b in r["boxes"]], f"{w}: boxes {j['boxes']}")
        a = np.load(f"{exdir}/{j['arr']}")
        ra = np.load(f"{base}/{r['arr']}")
        check(a.dtype == ra.dtype and np.array_equal(a, ra), f"{w}: ndarray from .npy")
        if "arrj" in j:
            a = np.load(f"{exdir}/{j['arrj']}")
            check(a.dtype == np.float32 and np.array_equal(a, np.array(r["arrj"], np.float32)),
                  f"{w}: ndarray from a nested list")
        check(open(f"{exdir}/{j['blob']}", "rb").read() == open(f"{base}/{r['blob']}", "rb").read(),
              f"{w}: bytes")
        check(open(f"{exdir}/{j['caption']}", "rb").read() == r["caption"].encode(), f"{w}: text")
        m = np.asarray(Image.open(f"{exdir}/{j['mask']}"))
        check(np.array_equal(m, np.asarray(Image.open(f"{base}/{r['mask']}"))), f"{w}: mask")
        check(open(f"{exdir}/{j['image']}", "rb").read() == open(f"{base}/{r['path']}", "rb").read(),
              f"{w}: image bytes")


mode = sys.argv[1]
if mode == "coco":
    coco(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), "--masks" in sys.argv)
elif mode == "pairs":
    pairs(*sys.argv[2:5], int(sys.argv[5]), sys.argv[6], sys.argv[7])
elif mode == "table":
    table(sys.argv[2], sys.argv[3], int(sys.argv[4]))
else:
    sys.exit(f"unknown mode {mode}")
for b in bad[:30]:
    print("MISMATCH:", b)
sys.exit(1 if bad else 0)
