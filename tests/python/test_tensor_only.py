"""test_tensor_only.py — data sets without images (`packdata pack --no-image`: JSON Lines rows of an
embedding, a .npy array, an int list, a text and a float, with and without a label) read back as
a PyTorch user reads them, every value compared exactly with the rows packed:
  - fastload.Loader yields FieldsBatch mappings with no "image" entry (shards and LMDB), in
    order and shuffled, the short last batch included;
  - fastload.torch.Loader yields the same values as torch tensors (dtype= leaves the fields as
    stored: there is no image to convert);
  - fastload.torch.Dataset in a DataLoader with 2 workers hands out every row once, exactly;
  - options that only act on an image (size, augment) are refused naming the missing image.
Needs PACKDATA (FL_PACKDATA, or FL_BINARY_DIR's) and /usr/bin/python3 with numpy (torch parts
skip without torch)."""
import collections
import json
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")

import fastload  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PACKDATA = os.environ.get("FL_PACKDATA") or os.path.join(
    os.environ.get("FL_BINARY_DIR", os.path.join(HERE, "..", "..", "build")), "tools", "packdata", "packdata")
N = 37  # rows: batches of 8 leave a short last one
FIELDS = ["--field", "emb:float_vector:5", "--field", "arr:ndarray:float32:2x3",
          "--field", "ids:int_list", "--field", "cap:text", "--field", "score:float"]


def make_rows(d, with_label):
    """N rows written to d/rows.jsonl (arrays as .npy files under d); returns them as numpy."""
    rng = np.random.default_rng(11)
    rows = []
    with open(f"{d}/rows.jsonl", "w", encoding="utf-8") as f:
        for r in range(N):
            row = {"emb": (rng.standard_normal(5) * 10.0 ** rng.integers(-4, 5)).astype(np.float32),
                   "arr": (rng.standard_normal((2, 3)) * 50).astype(np.float32),
                   "ids": rng.integers(-9, 10000, int(rng.integers(0, 7))).astype(np.int32),
                   "cap": ["", "tabular", "héllo “wörld”", "日本語"][r % 4] + ("" if r % 4 == 0 else f" {r}"),
                   "score": np.float32(r / 3 - 5), "label": r % 3}
            np.save(f"{d}/a{r}.npy", row["arr"])
            o = {"emb": [float(v) for v in row["emb"]], "arr": f"a{r}.npy",
                 "ids": [int(v) for v in row["ids"]], "cap": row["cap"], "score": float(row["score"])}
            if with_label:
                o["label"] = row["label"]
            f.write(json.dumps(o, ensure_ascii=False) + "\n")
            rows.append(row)
    return rows


def pack(d, dst, *extra):
    r = subprocess.run([PACKDATA, "pack", "--jsonl", f"{d}/rows.jsonl", dst, "--no-image", *FIELDS,
                        "--quiet", *extra], capture_output=True, text=True)
    assert r.returncode == 0, f"packdata pack {dst}: {r.stderr}"
    return dst


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    if not os.access(PACKDATA, os.X_OK):
        pytest.skip(f"no packdata at {PACKDATA}")
    t = str(tmp_path_factory.mktemp("tensor-only"))
    os.makedirs(f"{t}/lab")
    os.makedirs(f"{t}/nolab")
    rows = make_rows(f"{t}/lab", True)
    make_rows(f"{t}/nolab", False)  # the same values (same seed), no label key
    return {"rows": rows, "shards": pack(f"{t}/lab", f"{t}/shards.fl"),
            "lmdb": pack(f"{t}/lab", f"{t}/lmdb.fl", "--backend", "lmdb"),
            "nolab": pack(f"{t}/nolab", f"{t}/nolab.fl")}


def check_sample(get, i, row, with_label, what):
    """The sample i of a batch (get(name) -> its array, numpy) equals the row."""
    assert np.array_equal(get("emb")[i], row["emb"]), f"{what}: emb"
    assert get("emb").dtype == np.float32
    assert np.array_equal(get("arr")[i], row["arr"]), f"{what}: arr"
    n = int(get("ids_count")[i])
    assert n == len(row["ids"]) and np.array_equal(get("ids")[i, :n], row["ids"]), f"{what}: ids"
    assert not get("ids")[i, n:].any(), f"{what}: ids padding is not zero"
    c = int(get("cap_count")[i])
    assert bytes(get("cap")[i, :c]).decode() == row["cap"], f"{what}: cap"
    assert get("score")[i] == row["score"], f"{what}: score"
    if with_label:
        assert int(get("label")[i]) == row["label"], f"{what}: label"


KEYS = ["label", "emb", "arr", "ids", "ids_count", "cap", "cap_count", "score"]


@pytest.mark.parametrize("which,order", [("shards", "seq"), ("lmdb", "seq"), ("shards", "random"),
                                         ("nolab", "seq")])
def test_loader_exact(sets, which, order):
    rows, with_label = sets["rows"], which != "nolab"
    seen = collections.Counter()
    sizes = []
    with fastload.Loader(sets[which], batch_size=8, workers=2, order=order, seed=3) as L:
        assert L.dataset_size == N and len(L) == 5
        assert L.class_names == (["0", "1", "2"] if with_label else [])
        for b in L:
            assert isinstance(b, fastload.FieldsBatch)
            assert list(b) == (KEYS if with_label else KEYS[1:]), f"keys {list(b)} (an image?)"
            sizes.append(b.size)
            for i, idx in enumerate(b.indices):
                seen[int(idx)] += 1
                check_sample(b.__getitem__, i, rows[int(idx)], with_label, f"record {int(idx)}")
            if order == "seq":
                assert list(b.indices) == list(range(8 * b.batch, 8 * b.batch + b.size))
    assert sizes == [8, 8, 8, 8, 5]
    assert seen == {i: 1 for i in range(N)}


def test_refuses_image_options(sets):
    with pytest.raises(fastload.InvalidOptionError, match="no image field"):
        fastload.Loader(sets["shards"], batch_size=8, size=32, augment="rrc")


def test_torch_loader_exact(sets):
    torch = pytest.importorskip("torch")
    import fastload.torch as ft
    rows = sets["rows"]
    seen = collections.Counter()
    # dtype= converts an image field: with none, every field comes as stored
    with ft.Loader(sets["lmdb"], batch_size=8, order="random", seed=5, dtype="float32") as L:
        assert len(L) == 5 and len(L.dataset) == N and L.dataset.classes == ["0", "1", "2"]
        for epoch in range(2):
            L.set_epoch(epoch)
            for b in L:
                assert isinstance(b, dict) and list(b) == KEYS
                assert b["emb"].dtype == torch.float32 and b["ids"].dtype == torch.int32
                assert b["cap"].dtype == torch.uint8 and b["label"].dtype == torch.int32
                # which records: the values say (every row's emb differs; a mapping has no indices)
                for i in range(b["emb"].shape[0]):
                    r = next(k for k, row in enumerate(rows)
                             if np.array_equal(row["emb"], b["emb"][i].numpy()))
                    seen[(epoch, r)] += 1
                    check_sample(lambda k: b[k].numpy(), i, rows[r], True, f"epoch {epoch} record {r}")
    assert seen == {(e, r): 1 for e in range(2) for r in range(N)}


def test_torch_dataset_workers(sets):
    torch = pytest.importorskip("torch")
    import fastload.torch as ft
    rows = sets["rows"]
    ds = ft.Dataset(sets["shards"], batch_size=4, order="random", seed=9, workers=1)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    for epoch in range(2):
        ds.set_epoch(epoch)
        seen = collections.Counter()
        for b in dl:
            assert isinstance(b, dict) and list(b) == KEYS
            for i in range(b["emb"].shape[0]):
                r = next(k for k, row in enumerate(rows)
                         if np.array_equal(row["emb"], b["emb"][i].numpy()))
                seen[r] += 1
                check_sample(lambda k: b[k].numpy(), i, rows[r], True, f"epoch {epoch} record {r}")
        assert seen == {r: 1 for r in range(N)}, f"epoch {epoch}"
