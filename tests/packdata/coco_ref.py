"""coco_ref.py — a plain Python COCO reader, as a user would write one (json + PIL + numpy), with
a pure-numpy port of pycocotools' mask API (rleFrPoly, rleFrString, rleToString, RLE decode):
the reference the packdata tests compare packed COCO sets with. Also the generator's RLE
encoder. No pycocotools needed."""
import json
import math

import numpy as np


def rle_from_poly(xy, h, w):
    """pycocotools maskApi.c rleFrPoly, step for step (same integer rounding): counts."""
    scale = 5.0
    k = len(xy) // 2
    x = [int(scale * xy[2 * j] + .5) for j in range(k)] + [0]
    y = [int(scale * xy[2 * j + 1] + .5) for j in range(k)] + [0]
    x[k], y[k] = x[0], y[0]
    u, v = [], []
    for j in range(k):
        xs, xe, ys, ye = x[j], x[j + 1], y[j], y[j + 1]
        dx, dy = abs(xe - xs), abs(ys - ye)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            xs, xe, ys, ye = xe, xs, ye, ys
        s = (ye - ys) / dx if dx >= dy else (xe - xs) / dy  # dx == dy == 0 divides 0/0 in C
        if dx >= dy:
            for d in range(dx + 1):
                t = dx - d if flip else d
                u.append(t + xs)
                v.append(int(ys + s * t + .5) if dx else ys)
        else:
            for d in range(dy + 1):
                t = dy - d if flip else d
                v.append(t + ys)
                u.append(int(xs + s * t + .5))
    a = []
    for j in range(1, len(u)):
        if u[j] == u[j - 1]:
            continue
        xd = float(u[j] if u[j] < u[j - 1] else u[j] - 1)
        xd = (xd + .5) / scale - .5
        if math.floor(xd) != xd or xd < 0 or xd > w - 1:
            continue
        yd = float(v[j] if v[j] < v[j - 1] else v[j - 1])
        yd = (yd + .5) / scale - .5
        yd = 0 if yd < 0 else (h if yd > h else yd)
        yd = math.ceil(yd)
        a.append(int(xd) * h + int(yd))
    a.append(h * w)
    a.sort()
    p = 0
    for j in range(len(a)):
        t = a[j]
        a[j] -= p
        p = t
    b = [a[0]]
    j = 1
    while j < len(a):
        if a[j] > 0:
            b.append(a[j])
            j += 1
        else:
            j += 1
            if j < len(a):
                b[-1] += a[j]
                j += 1
    return b


def rle_decode(counts, h, w):
    """Uncompressed RLE (column-major, zeros first) -> bool [h, w]."""
    flat = np.zeros(h * w, dtype=bool)
    pos = 0
    for i, c in enumerate(counts):
        if i % 2:
            flat[pos:pos + c] = True
        pos += c
    return flat.reshape(w, h).T


def rle_encode(mask):
    """bool [h, w] -> uncompressed counts (column-major, zeros first)."""
    flat = mask.T.reshape(-1).astype(np.uint8)
    counts, cur, run = [], 0, 0
    for val in flat:
        if val != cur:
            counts.append(run)
            run, cur = 0, val
        run += 1
    counts.append(run)
    return counts


def rle_to_string(cnts):
    """pycocotools rleToString."""
    out = []
    for i in range(len(cnts)):
        x = int(cnts[i])
        if i > 2:
            x -= int(cnts[i - 2])
        more = True
        while more:
            c = x & 0x1f
            x >>= 5
            more = (x != -1) if (c & 0x10) else (x != 0)
            if more:
                c |= 0x20
            out.append(chr(c + 48))
    return "".join(out)


def rle_from_string(s):
    """pycocotools rleFrString."""
    cnts, p = [], 0
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            c = ord(s[p]) - 48
            x |= (c & 0x1f) << (5 * k)
            more = c & 0x20
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(cnts) > 2:
            x += cnts[-2]
        cnts.append(x)
    return cnts


def ann_to_mask(seg, h, w):
    """An annotation's segmentation -> bool [h, w] (annToMask)."""
    if isinstance(seg, list):
        m = np.zeros((h, w), dtype=bool)
        for poly in seg:
            m |= rle_decode(rle_from_poly(poly, h, w), h, w)
        return m
    counts = seg["counts"]
    if isinstance(counts, str):
        counts = rle_from_string(counts)
    return rle_decode(counts, h, w)


def read_coco(path, root, masks=True):
    """Records in "images" order: dict(file, image (PIL RGB array), boxes [n,4] float32 xyxy,
    labels [n] (category index in id order), iscrowd [n], mask (semantic, class index + 1))."""
    from PIL import Image
    d = json.load(open(path))
    cats = sorted(c["id"] for c in d["categories"])
    index = {cid: i for i, cid in enumerate(cats)}
    by_img = {}
    for a in d.get("annotations", []):
        by_img.setdefault(a["image_id"], []).append(a)
    out = []
    for im in d["images"]:
        h, w = im["height"], im["width"]
        anns = by_img.get(im["id"], [])
        boxes = np.zeros((len(anns), 4), dtype=np.float32)
        for i, a in enumerate(anns):
            x, y, bw, bh = a["bbox"]
            boxes[i] = [min(max(x, 0), w), min(max(y, 0), h), min(max(x + bw, 0), w),
                        min(max(y + bh, 0), h)]
        rec = dict(file=im["file_name"], boxes=boxes,
                   labels=np.array([index[a["category_id"]] for a in anns], dtype=np.int32),
                   iscrowd=np.array([a.get("iscrowd", 0) for a in anns], dtype=np.int32),
                   image=np.asarray(Image.open(f"{root}/{im['file_name']}").convert("RGB")))
        if masks:
            m = np.zeros((h, w), dtype=np.uint8 if len(cats) <= 254 else np.uint16)
            for a in anns:
                if "segmentation" in a:
                    m[ann_to_mask(a["segmentation"], h, w)] = index[a["category_id"]] + 1
            rec["mask"] = m
        out.append(rec)
    return out, [c["name"] for c in sorted(d["categories"], key=lambda c: c["id"])]
