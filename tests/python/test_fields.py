"""test_fields.py — batches of data sets with more than the classic fields, without the library:
fl_batch structs built in Python (the layout of loader/fastload.h's fl_batch_field) over numpy
memory, turned into the FieldsBatch mapping (names, shapes, dtypes, NAME_count, the short last
batch), the classic (image, int) pair recognised as the tuple case, fastload.torch's conversion
of a mapping (the image field normalized to NCHW, the rest as they are) and detection_targets
(boxes/labels per image, label_offset, per-class masks of a semantic mask), uint16 fields as int32
tensors, a field named as a count refused, labels whose count is not the boxes' refused. The end-to-end test
over a packed COCO-style set runs where packdata --coco and the loader's fields exist."""
import ctypes

import pytest

np = pytest.importorskip("numpy")
from fastload import _native, loader  # noqa: E402

FT = _native.FIELD_TYPE
DT = _native.DTYPE


def fake_batch(fields, n, epoch=0, batch=0):
    """An fl_batch whose fields are the given (name, type, dtype, array, counts) over numpy memory."""
    arr = (_native.fl_batch_field * len(fields))()
    keep = []
    for i, (name, typ, dtype, a, counts) in enumerate(fields):
        f = arr[i]
        nm = name.encode()
        keep.append(nm)  # c_char_p points into the bytes object: keep it alive
        f.name = nm
        f.type, f.dtype, f.ndim = FT[typ], DT[dtype], a.ndim
        for d, v in enumerate(a.shape):
            f.shape[d] = v
        f.data = a.ctypes.data
        f.bytes = a.nbytes
        if counts is not None:
            f.counts = counts.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    idx = np.arange(n, dtype=np.uint64)
    b = _native.fl_batch()
    b.indices = idx.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64))
    b.size, b.epoch, b.batch, b.num_fields = n, epoch, batch, len(fields)
    b.fields = ctypes.cast(arr, ctypes.POINTER(_native.fl_batch_field))
    return b, (arr, keep, idx, fields)


def detection_fields(B=4, H=5, W=6, M=3):
    r = np.random.default_rng(0)
    image = r.integers(0, 255, (B, H, W, 3), dtype=np.uint8)
    counts = np.array([2, 0, 3, 1], np.int32)[:B]
    boxes = np.zeros((B, M, 4), np.float32)
    labels = np.zeros((B, M), np.int32)
    for i, c in enumerate(counts):
        boxes[i, :c] = r.uniform(0, 5, (c, 4)).astype(np.float32)
        labels[i, :c] = r.integers(0, 7, c)
    mask = np.zeros((B, H, W), np.uint8)
    mask[0, 1:3, 1:4] = 3
    mask[0, 4, :] = 1
    mask[2, :, :2] = 2
    return [("image", "image", "uint8", image, None), ("boxes", "boxes", "float32", boxes, counts),
            ("labels", "int_list", "int32", labels, counts), ("mask", "mask", "uint8", mask, None)]


def test_mapping_views_and_counts():
    fields = detection_fields()
    b, keep = fake_batch(fields, 4)
    assert not loader._is_classic(b)
    out = loader._field_arrays(None, b, 3, copy=False)  # the short last batch: 3 of 4
    assert list(out) == ["image", "boxes", "boxes_count", "labels", "labels_count", "mask"]
    for name, typ, dtype, a, counts in fields:
        assert out[name].dtype == np.dtype(dtype) and out[name].shape == (3,) + a.shape[1:]
        assert np.array_equal(out[name], a[:3])
        assert not out[name].flags.owndata  # a view of the batch memory
        if counts is not None:
            assert out[name + "_count"].dtype == np.int32
            assert out[name + "_count"].tolist() == counts[:3].tolist()
    copied = loader._field_arrays(None, b, 4, copy=True)
    assert all(v.flags.owndata for v in copied.values())
    fb = loader.FieldsBatch(copied, np.arange(4, dtype=np.uint64), b, True)
    assert fb.size == 4 and fb["boxes"].shape == (4, 3, 4) and "boxes" in repr(fb)


def test_classic_pair_is_the_tuple_case():
    image = np.zeros((2, 3, 3, 1), np.uint8)
    label = np.zeros(2, np.int32)
    b, keep = fake_batch([("image", "image", "uint8", image, None), ("label", "int", "int32", label, None)], 2)
    assert loader._is_classic(b)
    b2, keep2 = fake_batch([("label", "int", "int32", label, None)], 2)
    assert not loader._is_classic(b2)  # a tensor-only set (no image) is a mapping
    b3 = _native.fl_batch()  # a library that fills no fields (num_fields 0)
    assert loader._is_classic(b3)


def test_torch_mapping_and_detection_targets():
    torch = pytest.importorskip("torch")
    import fastload.torch as ft
    fields = detection_fields()
    b, keep = fake_batch(fields, 4)
    fb = loader.FieldsBatch(loader._field_arrays(None, b, 4, copy=True),
                            np.arange(4, dtype=np.uint64), b, True)
    fb.kinds = {"image": FT["image"], "boxes": FT["boxes"], "labels": FT["int_list"],
                "mask": FT["mask"]}
    feed = ft._Feeder("cpu", torch.float32, "nchw", 0, 1)
    t = feed(fb)
    assert t["image"].shape == (4, 3, 5, 6) and t["image"].dtype == torch.float32
    assert torch.allclose(t["image"], torch.from_numpy(fields[0][3]).permute(0, 3, 1, 2) / 255.0)
    assert t["boxes"].dtype == torch.float32 and t["boxes_count"].dtype == torch.int32
    targets = ft.detection_targets(t)
    assert len(targets) == 4
    counts = fields[1][4]
    for i, d in enumerate(targets):
        n = int(counts[i])
        assert d["boxes"].shape == (n, 4) and d["boxes"].dtype == torch.float32
        assert torch.equal(d["boxes"], torch.from_numpy(fields[1][3][i, :n]))
        assert d["labels"].dtype == torch.int64
        assert d["labels"].tolist() == (fields[2][3][i, :n] + 1).tolist()  # 0 is the background
    # per-class masks of the semantic mask: image 0 holds classes 0 and 2 (mask values 1 and 3)
    assert targets[0]["masks"].shape == (2, 5, 6) and targets[0]["masks"].dtype == torch.uint8
    assert targets[0]["mask_labels"].tolist() == [1, 3]
    assert int(targets[0]["masks"][1].sum()) == 6 and targets[1]["masks"].shape == (0, 5, 6)
    raw = ft.detection_targets(t, label_offset=0)
    assert raw[2]["labels"].tolist() == fields[2][3][2, :3].tolist()
    assert raw[2]["mask_labels"].tolist() == [1]


def test_torch_mapping_uint16_fields():
    """uint16 fields (a mask of more than 254 classes, packdata's mask:uint16; a uint16 ndarray)
    come from fastload.torch as int32 tensors of the same values, and detection_targets takes
    such a mask (before: TypeError from torch.from_numpy, torch < 2.3 has no uint16)."""
    torch = pytest.importorskip("torch")
    import fastload.torch as ft
    B, H, W = 2, 3, 4
    image = np.zeros((B, H, W, 3), np.uint8)
    mask = np.zeros((B, H, W), np.uint16)
    mask[0, 0, :2] = 300   # class 299
    mask[0, 2, 3] = 65535  # the largest id a uint16 mask holds
    mask[1, 1, 1] = 1
    arr = np.array([[0, 1, 40000, 65535], [7, 8, 9, 10]], np.uint16)
    boxes = np.zeros((B, 1, 4), np.float32)
    counts = np.array([1, 0], np.int32)
    labels = np.zeros((B, 1), np.int32)
    fields = [("image", "image", "uint8", image, None), ("boxes", "boxes", "float32", boxes, counts),
              ("labels", "int_list", "int32", labels, counts), ("mask", "mask", "uint16", mask, None),
              ("arr", "ndarray", "uint16", arr, None)]
    b, keep = fake_batch(fields, B)
    for copy in (True, False):  # a copied batch, and views over the (here numpy) batch memory
        fb = loader.FieldsBatch(loader._field_arrays(None, b, B, copy=copy),
                                np.arange(B, dtype=np.uint64), b, copy)
        fb.kinds = {"image": FT["image"], "boxes": FT["boxes"], "labels": FT["int_list"],
                    "mask": FT["mask"], "arr": FT["ndarray"]}
        assert fb["mask"].dtype == np.uint16 and fb["arr"].dtype == np.uint16  # numpy: as stored
        t = ft._Feeder("cpu", None, "nchw", None, None)(fb)
        assert t["mask"].dtype == torch.int32 and t["arr"].dtype == torch.int32
        assert t["mask"].tolist() == mask.tolist() and t["arr"].tolist() == arr.tolist()
        d = ft.detection_targets(t)
        assert d[0]["mask_labels"].tolist() == [300, 65535] and d[1]["mask_labels"].tolist() == [1]
        assert d[0]["masks"][0].tolist() == (mask[0] == 300).astype(np.uint8).tolist()


@pytest.mark.parametrize("count_first", [False, True])
def test_field_named_as_a_count_is_refused(count_first):
    """A set packed with a field named boxes_count beside the boxes field (packdata took it until
    e005565 and refuses it now; older sets still have it): in the mapping one of the
    two replaced the other without a word (the box counts became the field's values, so
    detection_targets sliced padding rows as boxes; or the field was lost). Now an
    UnsupportedError names both."""
    import fastload
    B = 2
    image = np.zeros((B, 3, 4, 3), np.uint8)
    boxes = np.zeros((B, 2, 4), np.float32)
    counts = np.array([1, 2], np.int32)
    theirs = np.array([100, 101], np.int32)
    fields = [("boxes", "boxes", "float32", boxes, counts), ("boxes_count", "int", "int32", theirs, None)]
    if count_first:
        fields.reverse()
    b, keep = fake_batch([("image", "image", "uint8", image, None)] + fields, B)
    for copy in (True, False):
        with pytest.raises(fastload.UnsupportedError, match="'boxes_count'.*'boxes'"):
            loader._field_arrays(None, b, B, copy=copy)


def test_detection_targets_refuses_labels_not_of_the_boxes():
    """Labels packed as their own int_list (packdata --jsonl/--csv --field labels:int_list) are
    not attached to the boxes: a crop that drops boxes keeps all the labels, and detection_targets
    paired the first n labels with the n boxes left (wrong classes, silently). Counts that differ
    now raise InvalidOptionError naming the image; equal counts work as before."""
    torch = pytest.importorskip("torch")
    import fastload
    import fastload.torch as ft
    boxes = torch.zeros((2, 3, 4))
    labels = torch.tensor([[4, 5, 6], [7, 8, 9]], dtype=torch.int32)
    b = {"boxes": boxes, "boxes_count": torch.tensor([1, 3], dtype=torch.int32), "labels": labels,
         "labels_count": torch.tensor([3, 3], dtype=torch.int32)}
    with pytest.raises(fastload.InvalidOptionError, match="image 0 of the batch has 1 boxes but 3 labels"):
        ft.detection_targets(b)
    b["labels_count"] = torch.tensor([1, 3], dtype=torch.int32)
    assert [d["labels"].tolist() for d in ft.detection_targets(b)] == [[5], [8, 9, 10]]
