"""test_fields_e2e.py — data sets with fields end to end, as a PyTorch user meets them: COCO sets of
objects drawn on real photographs (fields_data.py: one category per object in an image, so the
semantic mask tells the objects apart; exact RLE masks; the augmented set without pointed shapes,
whose tips a nearest-neighbour downscale can lose) packed with `packdata pack --coco ...
--masks` (shards and LMDB), read through fastload.Loader / fastload.torch and compared with the
plain Python COCO reader (tests/packdata/coco_ref.py: json + PIL + numpy):
  - no augmentation: every record's image, boxes, labels, iscrowd and mask equal the reader's;
  - augment="rrc" (and "object_crop"), flip=True, 3 epochs: for every object of every sample, a box wholly inside the
    crop equals the extent of its object's mask (within 2 px), a box clipped by the crop contains
    its mask's visible part, an object whose mask is still visible keeps its box, and masks hold
    only the class ids the record had;
  - fastload.torch yields the same arrays as tensors; detection_targets gives valid torchvision
    targets; mid-epoch resume with fields is exact; fastload.torch.Dataset in a DataLoader with 2
    workers hands out every sample once.
Needs PACKDATA (FL_PACKDATA, or FL_BINARY_DIR's) and /usr/bin/python3 with PIL, numpy, skimage."""
import collections
import hashlib
import json
import os
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("PIL")
pytest.importorskip("skimage")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "packdata"))
import fields_data  # noqa: E402
from coco_ref import read_coco  # noqa: E402

import fastload  # noqa: E402

PACKDATA = os.environ.get("FL_PACKDATA") or os.path.join(
    os.environ.get("FL_BINARY_DIR", os.path.join(HERE, "..", "..", "build")), "tools", "packdata", "packdata")
W0, H0 = 192, 144  # the one-size set (exactness with size = the images' own size)
TOL = 2.0          # px: a box against its mask's extent after nearest resampling


def pack(src, dst, *extra):
    r = subprocess.run([PACKDATA, "pack", "--coco", f"{src}/instances.json", "--root", f"{src}/images",
                        dst, "--masks", "--quiet", *extra], capture_output=True, text=True)
    assert r.returncode == 0, f"packdata pack {dst}: {r.stderr}"
    return dst


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    if not os.access(PACKDATA, os.X_OK):
        pytest.skip(f"no packdata at {PACKDATA}")
    t = str(tmp_path_factory.mktemp("fields-e2e"))
    fields_data.coco(f"{t}/same", 24, size=(W0, H0), seed=1)
    fields_data.coco(f"{t}/vary", 40, size=None, seed=2, round_shapes=True)
    out = {"same": pack(f"{t}/same", f"{t}/same.fl"), "vary": pack(f"{t}/vary", f"{t}/vary.fl"),
           "same_lmdb": pack(f"{t}/same", f"{t}/same.lmdb", "--backend", "lmdb")}
    out["vary_dir"] = f"{t}/vary"
    out["ref_same"] = read_coco(f"{t}/same/instances.json", f"{t}/same/images")
    out["ref_vary"] = read_coco(f"{t}/vary/instances.json", f"{t}/vary/images")
    return out


@pytest.mark.parametrize("which", ["same", "same_lmdb"])
def test_exact_without_augmentation(sets, which):
    ref, classes = sets["ref_same"]
    seen = collections.Counter()
    with fastload.Loader(sets[which], batch_size=5, workers=2, size=(H0, W0)) as L:
        assert L.class_names == classes
        for b in L:
            assert isinstance(b, fastload.FieldsBatch)
            assert b["image"].dtype == np.uint8 and b["image"].shape[1:] == (H0, W0, 3)
            assert b["mask"].shape[1:] == (H0, W0)
            for i, idx in enumerate(b.indices):
                r = ref[int(idx)]
                seen[int(idx)] += 1
                n = int(b["boxes_count"][i])
                what = f"record {int(idx)} ({r['file']})"
                assert np.array_equal(b["image"][i], r["image"]), f"{what}: image differs"
                assert n == len(r["boxes"]), what
                assert np.array_equal(b["boxes"][i, :n], r["boxes"]), f"{what}: boxes"
                assert not b["boxes"][i, n:].any(), f"{what}: padding rows are not zero"
                assert np.array_equal(b["labels"][i, :n], r["labels"]), f"{what}: labels"
                assert np.array_equal(b["iscrowd"][i, :n], r["iscrowd"]), f"{what}: iscrowd"
                assert int(b["labels_count"][i]) == n
                assert np.array_equal(b["mask"][i], r["mask"]), f"{what}: mask"
    assert seen == {i: 1 for i in range(len(ref))}


def check_sample(b, i, r, S, what):
    """The consistency of one augmented sample with its record `r` (see the module's doc);
    returns the number of objects checked wholly inside, clipped, and boxes without a mask pixel."""
    n = int(b["boxes_count"][i])
    boxes, labels, mask = b["boxes"][i, :n], b["labels"][i, :n], b["mask"][i]
    orig = set(int(v) for v in r["labels"])
    present = set(int(v) for v in np.unique(mask)) - {0}
    assert present <= {v + 1 for v in orig}, f"{what}: mask ids {present}, record classes {orig}"
    assert set(int(v) for v in labels) <= orig, f"{what}: labels {labels} not of the record"
    assert len(set(labels.tolist())) == n, f"{what}: an object twice"
    assert np.all(boxes[:, 2] > boxes[:, 0]) and np.all(boxes[:, 3] > boxes[:, 1]), what
    assert np.all(boxes >= 0) and np.all(boxes[:, [0, 2]] <= S) and np.all(boxes[:, [1, 3]] <= S), what
    inside = clipped = sliver = 0
    for (x0, y0, x1, y1), lab in zip(boxes.tolist(), labels.tolist()):
        ys, xs = np.nonzero(mask == lab + 1)
        w = f"{what}: object of class {lab}, box {[round(v, 2) for v in (x0, y0, x1, y1)]}"
        edge = min(x0, y0) <= 1e-3 or max(x1, y1) >= S - 1e-3
        if len(xs) == 0:
            # a sliver the nearest sampling missed: at most about a pixel thin
            assert edge or min(x1 - x0, y1 - y0) < 2 * TOL, f"{w}: no mask pixel"
            sliver += 1
            continue
        ext = (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
        if not edge:
            assert np.allclose(ext, (x0, y0, x1, y1), atol=TOL), f"{w}: mask extent {ext}"
            inside += 1
        else:
            assert ext[0] >= x0 - TOL and ext[1] >= y0 - TOL and ext[2] <= x1 + TOL and \
                ext[3] <= y1 + TOL, f"{w}: mask extent {ext} outside the clipped box"
            clipped += 1
    kept = {int(v) + 1 for v in labels}
    for v in present - kept:  # a visible object lost its box: only a sliver may
        ys, xs = np.nonzero(mask == v)
        assert xs.max() - xs.min() < 3 or ys.max() - ys.min() < 3, \
            f"{what}: class {v - 1} shows {len(xs)} mask pixels but its box was dropped"
    return inside, clipped, sliver


@pytest.mark.parametrize("augment", ["rrc", "object_crop"])
def test_consistency_under_crop_flip(sets, augment):
    ref, _ = sets["ref_vary"]
    S = 128
    inside = clipped = sliver = samples = 0
    with fastload.Loader(sets["vary"], batch_size=8, workers=2, size=S, augment=augment, flip=True,
                         seed=7) as L:
        for epoch in range(3):
            seen = set()
            for b in L:
                assert b.epoch == epoch
                for i, idx in enumerate(b.indices):
                    seen.add(int(idx))
                    a, c, s = check_sample(b, i, ref[int(idx)], S, f"epoch {epoch} record {int(idx)}")
                    inside, clipped, sliver, samples = inside + a, clipped + c, sliver + s, samples + 1
            assert seen == set(range(len(ref)))
    # the check saw both kinds many times (numbers for the report: pytest -s)
    print(f"\n{augment}+flip 3 epochs: {samples} samples, {inside} boxes inside the crop, {clipped} clipped, "
          f"{sliver} slivers without a mask pixel")
    assert samples == 3 * len(ref) and inside > 50 and clipped > 20


def test_flip_mirrors_boxes_and_masks(sets):
    """flip alone (no crop): a flipped sample's boxes and mask are the mirror of the unflipped."""
    ref, _ = sets["ref_same"]
    with fastload.Loader(sets["same"], batch_size=24, workers=2, size=(H0, W0), flip=True,
                         order="seq", seed=3) as L:
        b = L.next_batch()
    flipped = 0
    for i, idx in enumerate(b.indices):
        r = ref[int(idx)]
        n = int(b["boxes_count"][i])
        if np.array_equal(b["mask"][i], r["mask"]) and not np.array_equal(r["mask"], r["mask"][:, ::-1]):
            assert np.array_equal(b["boxes"][i, :n], r["boxes"])
            continue
        flipped += 1
        assert np.array_equal(b["mask"][i], r["mask"][:, ::-1]), f"record {int(idx)}"
        want = r["boxes"].copy()
        want[:, [0, 2]] = W0 - r["boxes"][:, [2, 0]]
        assert np.allclose(b["boxes"][i, :n], want, atol=1e-4), f"record {int(idx)}"
    assert 0 < flipped < 24


def batches(path, n=None, **kw):
    out = []
    with fastload.Loader(path, **kw) as L:
        for b in (L.epoch() if n is None else L.batches(n)):
            out.append({k: v.copy() for k, v in b.items()})
            out[-1]["indices"] = b.indices.copy()
    return out


def same_batches(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            assert np.array_equal(x[k], y[k]), k


def test_jsonl_labels_of_boxes_follow_their_boxes(sets):
    """The same objects packed from JSON Lines, labels as `--field labels:int_list:of=boxes`,
    crop like the COCO set's: under RRC + flip over 3 epochs every sample's boxes and labels
    equal the COCO pack's (a dropped box takes its label along). Packed as a plain int_list, the
    labels stay whole while boxes drop (what detection_targets refuses)."""
    ref, _ = sets["ref_vary"]
    img_dir = f"{sets['vary_dir']}/images"
    rows = f"{img_dir}/rows.jsonl"
    with open(rows, "w") as f:
        for r in ref:
            f.write(json.dumps({"path": r["file"], "boxes": [[float(v) for v in b] for b in r["boxes"]],
                                "labels": [int(v) for v in r["labels"]]}) + "\n")
    def pack_jsonl(dst, labels):
        r = subprocess.run([PACKDATA, "pack", "--jsonl", rows, dst, "--field", "boxes:boxes",
                            "--field", labels, "--quiet"], capture_output=True, text=True)
        assert r.returncode == 0, f"packdata pack {dst}: {r.stderr}"
        return dst
    of = pack_jsonl(f"{sets['vary_dir']}-of.fl", "labels:int_list:of=boxes")
    loose = pack_jsonl(f"{sets['vary_dir']}-loose.fl", "labels:int_list")
    kw = dict(batch_size=8, workers=2, size=96, augment="rrc", flip=True, seed=3)
    bpe = len(fastload.Loader(sets["vary"], **kw))
    coco, mine, plain = (batches(p, 3 * bpe, **kw) for p in (sets["vary"], of, loose))
    kept = total = 0
    for x, y in zip(coco, mine):
        assert np.array_equal(x["indices"], y["indices"])
        for k in ("boxes", "boxes_count", "labels", "labels_count"):
            assert np.array_equal(x[k], y[k]), k
        kept += int(y["boxes_count"].sum())
        total += sum(len(ref[int(i)]["boxes"]) for i in y["indices"])
    assert 0 < kept < total  # crops dropped boxes, and their labels with them
    assert any((p["labels_count"] != p["boxes_count"]).any() for p in plain)


def test_torch_same_as_numpy_and_targets(sets):
    torch = pytest.importorskip("torch")
    import fastload.torch as ft
    kw = dict(batch_size=8, workers=2, size=128, augment="rrc", flip=True, seed=5)
    ref = batches(sets["vary"], **kw)
    K = 5
    with ft.Loader(sets["vary"], **kw) as T:
        got = list(T)
        assert len(got) == len(ref)
        for t, r in zip(got, ref):
            assert isinstance(t, dict)
            for k, v in t.items():
                assert isinstance(v, torch.Tensor) and np.array_equal(v.numpy(), r[k]), k
            tg = ft.detection_targets(t)
            assert len(tg) == len(r["boxes_count"])
            for i, d in enumerate(tg):
                n = int(r["boxes_count"][i])
                assert d["boxes"].dtype == torch.float32 and tuple(d["boxes"].shape) == (n, 4)
                assert d["labels"].dtype == torch.int64 and tuple(d["labels"].shape) == (n,)
                assert torch.all(d["boxes"][:, 2:] > d["boxes"][:, :2])
                assert torch.all((d["labels"] >= 1) & (d["labels"] <= K))
                assert np.array_equal(d["labels"].numpy() - 1, r["labels"][i, :n])
                present = sorted(set(np.unique(r["mask"][i]).tolist()) - {0})
                assert d["masks"].dtype == torch.uint8 and d["masks"].shape[0] == len(present)
                assert d["mask_labels"].tolist() == present
                for m, v in zip(d["masks"], present):
                    assert np.array_equal(m.numpy().astype(bool), r["mask"][i] == v)
    # float32 NCHW images for a torchvision model, the other fields unchanged
    with ft.Loader(sets["vary"], dtype="float32", mean=0, std=1, **kw) as T:
        t = next(iter(T))
        assert t["image"].dtype == torch.float32 and tuple(t["image"].shape) == (8, 3, 128, 128)
        assert np.allclose(t["image"].permute(0, 2, 3, 1).numpy() * 255, ref[0]["image"], atol=1e-3)
        assert np.array_equal(t["boxes"].numpy(), ref[0]["boxes"])


def test_resume_mid_epoch(sets):
    kw = dict(batch_size=6, workers=2, size=96, augment="rrc", flip=True, seed=11)
    whole = batches(sets["vary"], n=10, **kw)   # 7 batches an epoch: crosses into epoch 1
    with fastload.Loader(sets["vary"], **kw) as L:
        for _ in range(3):
            L.next_batch()
        state = L.state_dict()
    assert (state["epoch"], state["batch"]) == (0, 3)
    out = []
    with fastload.Loader(sets["vary"], **kw) as L:
        L.load_state_dict(state)
        for b in L.batches(7):
            out.append({k: v.copy() for k, v in b.items()})
            out[-1]["indices"] = b.indices.copy()
    same_batches(whole[3:], out)


def digest(b, i):
    h = hashlib.sha1(np.ascontiguousarray(b["image"][i]).tobytes())
    n = int(b["boxes_count"][i])
    h.update(np.ascontiguousarray(b["boxes"][i, :n]).tobytes())
    h.update(np.ascontiguousarray(b["mask"][i]).tobytes())
    return h.hexdigest()


def test_dataloader_workers_every_sample_once(sets):
    torch = pytest.importorskip("torch")
    import fastload.torch as ft
    kw = dict(workers=1, size=(H0, W0))
    want = collections.Counter()
    for b in batches(sets["same"], batch_size=5, **kw):
        want.update(digest(b, i) for i in range(len(b["indices"])))
    ds = ft.Dataset(sets["same"], batch_size=5, **kw)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    for epoch in range(2):
        ds.set_epoch(epoch)
        got = collections.Counter()
        for t in dl:
            assert isinstance(t, dict) and t["image"].dtype == torch.uint8
            got.update(digest({k: v.numpy() for k, v in t.items()}, i) for i in range(len(t["boxes_count"])))
        assert got == want, f"epoch {epoch}"
