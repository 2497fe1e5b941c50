"""gen_fields_data.py OUT — test inputs for packdata's field sources, drawn on real photographs
(skimage.data: astronaut, coffee, chelsea, rocket, camera):
  OUT/coco/images/*.jpg + OUT/coco/instances.json — objects (filled polygons, ellipses) drawn on
      the photos; their annotations as polygons (one or two per object), uncompressed RLE lists
      (crowd) and compressed RLE strings; category ids out of order and with gaps; an image with
      no annotation; a box 0.5 px outside its image (clipped);
  OUT/voc/JPEGImages/*.jpg + SegmentationClass/*.png (palette PNGs, 255 border) + one image
      without a mask;
  OUT/city/leftImg8bit/train/c/x_leftImg8bit.png + gtFine/train/c/x_gtFine_labelIds.png (+ a
      _gtFine_color.png that must not pair);
  OUT/tab/*.npy, blobs, fields.csv / fields.jsonl with every --field type.
Run with /usr/bin/python3 (PIL, numpy, skimage)."""
import json
import os
import sys

import numpy as np
from PIL import Image, ImageDraw
from skimage import data

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from coco_ref import rle_encode, rle_to_string  # noqa: E402

OUT = sys.argv[1]


def photo(name, scale):
    a = getattr(data, name)()
    if a.ndim == 2:
        a = np.stack([a] * 3, -1)
    im = Image.fromarray(a[..., :3])
    return im.resize((max(1, int(im.width * scale)), max(1, int(im.height * scale))), Image.BILINEAR)


def ellipse_poly(cx, cy, rx, ry, n=24):
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return [round(float(v), 2) for p in zip(cx + rx * np.cos(t), cy + ry * np.sin(t)) for v in p]


def coco():
    d = f"{OUT}/coco/images"
    os.makedirs(d, exist_ok=True)
    cats = [{"id": 7, "name": "cup"}, {"id": 2, "name": "person"}, {"id": 11, "name": "cat"},
            {"id": 5, "name": "rocket"}]
    rng = np.random.default_rng(1)
    images, anns = [], []
    aid = 100
    specs = [("astronaut", 0.25), ("coffee", 0.25), ("chelsea", 0.3), ("rocket", 0.2), ("camera", 0.2)]
    for i, (name, sc) in enumerate(specs):
        im = photo(name, sc)
        w, h = im.size
        draw = ImageDraw.Draw(im)
        iid = 1000 + 3 * i  # ids not in file order of anything
        images.append({"id": iid, "file_name": f"{name}.jpg", "width": w, "height": h})
        if name == "camera":
            im.save(f"{d}/{name}.jpg", quality=92)
            continue  # no annotations: 0 boxes
        for k in range(3):
            cat = cats[(i + k) % len(cats)]["id"]
            cx, cy = rng.uniform(0.25, 0.75) * w, rng.uniform(0.25, 0.75) * h
            rx, ry = rng.uniform(0.08, 0.2) * w, rng.uniform(0.08, 0.2) * h
            poly = ellipse_poly(cx, cy, rx, ry)
            colour = tuple(int(c) for c in rng.integers(0, 255, 3))
            draw.polygon(poly, fill=colour)
            xs, ys = poly[0::2], poly[1::2]
            bbox = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
            a = {"id": aid, "image_id": iid, "category_id": cat, "bbox": [round(v, 2) for v in bbox],
                 "area": 1.0, "iscrowd": 0}
            aid += 1
            if k == 0:
                a["segmentation"] = [poly]
            elif k == 1:
                # two polygons, one object (an occluded object split in two)
                p2 = ellipse_poly(cx + rx * 1.5, cy, rx * 0.4, ry * 0.4, 12)
                draw.polygon(p2, fill=colour)
                a["segmentation"] = [poly, p2]
                xs2 = xs + p2[0::2]
                a["bbox"][2] = round(min(max(xs2) - bbox[0], w - bbox[0]), 2)
                a["bbox"] = [round(v, 2) for v in a["bbox"]]
            else:
                m = np.zeros((h, w), dtype=bool)
                yy, xx = np.mgrid[0:h, 0:w]
                m[((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1] = True
                counts = rle_encode(m)
                if i % 2:
                    a["segmentation"] = {"size": [h, w], "counts": counts}
                    a["iscrowd"] = 1
                else:
                    a["segmentation"] = {"size": [h, w], "counts": rle_to_string(counts)}
                ys_, xs_ = np.nonzero(m)
                a["bbox"] = [float(xs_.min()), float(ys_.min()), float(xs_.max() + 1 - xs_.min()),
                             float(ys_.max() + 1 - ys_.min())]
            anns.append(a)
        if i == 0:  # a box sticking out by 0.5 px: clipped
            anns.append({"id": aid, "image_id": iid, "category_id": 2, "bbox": [-0.5, 2, 10, 10],
                         "area": 1.0, "iscrowd": 0})
            aid += 1
        im.save(f"{d}/{name}.jpg", quality=92)
    rng.shuffle(anns)  # annotations of an image need not be contiguous
    json.dump({"images": images, "annotations": anns, "categories": cats},
              open(f"{OUT}/coco/instances.json", "w"))


def voc():
    os.makedirs(f"{OUT}/voc/JPEGImages", exist_ok=True)
    os.makedirs(f"{OUT}/voc/SegmentationClass", exist_ok=True)
    pal = [0] * 768
    for i in range(256):
        pal[3 * i:3 * i + 3] = [(i * 37) % 256, (i * 91) % 256, (i * 53) % 256]
    for j, (name, sc) in enumerate([("astronaut", 0.2), ("coffee", 0.2), ("chelsea", 0.25)]):
        im = photo(name, sc)
        w, h = im.size
        m = np.zeros((h, w), dtype=np.uint8)
        m[h // 4:h // 2, w // 4:w // 2] = 1 + j
        m[h // 2:3 * h // 4, w // 3:2 * w // 3] = 15
        m[h // 4 - 1, :] = 255  # VOC's "void" border
        im.save(f"{OUT}/voc/JPEGImages/2007_{j:06d}.jpg", quality=90)
        p = Image.fromarray(m, "P")
        p.putpalette(pal)
        p.save(f"{OUT}/voc/SegmentationClass/2007_{j:06d}.png")
    photo("rocket", 0.1).save(f"{OUT}/voc/JPEGImages/2007_000099.jpg")  # no mask: not packed


def city():
    base = f"{OUT}/city"
    os.makedirs(f"{base}/leftImg8bit/train/aachen", exist_ok=True)
    os.makedirs(f"{base}/gtFine/train/aachen", exist_ok=True)
    for j, (name, sc) in enumerate([("coffee", 0.15), ("rocket", 0.15)]):
        im = photo(name, sc)
        w, h = im.size
        stem = f"aachen_{j:06d}_000019"
        im.save(f"{base}/leftImg8bit/train/aachen/{stem}_leftImg8bit.png")
        m = (np.add.outer(np.arange(h), np.arange(w)) % 34).astype(np.uint8)
        Image.fromarray(m, "L").save(f"{base}/gtFine/train/aachen/{stem}_gtFine_labelIds.png")
        Image.fromarray(np.zeros((h, w, 3), np.uint8)).save(
            f"{base}/gtFine/train/aachen/{stem}_gtFine_color.png")


def tab():
    d = f"{OUT}/tab"
    os.makedirs(d, exist_ok=True)
    rows = []
    for j, (name, sc) in enumerate([("astronaut", 0.1), ("coffee", 0.1), ("chelsea", 0.1)]):
        im = photo(name, sc)
        im.save(f"{d}/{name}.jpg")
        w, h = im.size
        arr = (np.arange(12, dtype=np.float32).reshape(3, 4) * (j + 1)).astype(np.float32)
        np.save(f"{d}/{name}.npy", arr)
        open(f"{d}/{name}.bin", "wb").write(bytes(range(j, j + 7)))
        m = np.full((h, w), j + 1, np.uint8)
        Image.fromarray(m, "L").save(f"{d}/{name}_mask.png")
        rows.append(dict(path=f"{name}.jpg", label=j % 2, score=0.5 + j, tags=list(range(j + 1)),
                         emb=[float(j), 1.0, -2.5], boxes=[[1, 2, 5, 6]] * j,
                         arr=f"{name}.npy", arrj=(arr + 1).tolist(), blob=f"{name}.bin",
                         caption=f"a photo of {name}, \u00e9t\u00e9", mask=f"{name}_mask.png",
                         count=j * 10))
    with open(f"{d}/fields.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    with open(f"{d}/fields.csv", "w") as f:
        f.write("path,label,score,tags,emb,boxes,arr,blob,caption,mask,count\n")
        for r in rows:
            f.write(",".join([r["path"], str(r["label"]), str(r["score"]),
                              " ".join(map(str, r["tags"])), '"' + json.dumps(r["emb"]) + '"',
                              '"' + json.dumps(r["boxes"]) + '"', r["arr"], r["blob"],
                              '"' + r["caption"] + '"', r["mask"], str(r["count"])]) + "\n")


coco()
voc()
city()
tab()
