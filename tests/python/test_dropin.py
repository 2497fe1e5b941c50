"""test_dropin.py — fastload.torch.Loader as a DataLoader drop-in: an exact evaluation of a set
whose size is not a multiple of the batch (the last batch short, every sample once, no repeat,
len() counting it), .dataset (len, classes) and .sampler.set_epoch as a reference script reads
them, one set of defaults across fastload.Loader and fastload.torch.Loader (sequential order
without random augmentation, drop_last False), the batch_transform hook, DistributedSampler's
shares with world > 1, keyword-only options."""
import os

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
import fastload  # noqa: E402
import fastload.torch as ft  # noqa: E402
from conftest import COUNT, H, K, W  # noqa: E402


def record_of(images):
    return ((np.asarray(images)[:, 0, 0, 0].astype(np.int64) * 183) % 256).tolist()


@pytest.mark.parametrize("batch", [16, 7, 100, 128])
def test_exact_evaluation(ds, batch):
    # a reference-style evaluate(): sums over batches, compares with len(loader.dataset)
    with ft.Loader(ds, batch_size=batch, augment="none", workers=2) as L:
        assert len(L) == -(-COUNT // batch) and L.drop_last is False
        for _ in range(2):
            seen, n = [], 0
            for images, labels in L:
                assert images.dtype == torch.uint8 and 0 < len(labels) <= batch
                seen += record_of(images.numpy())
                n += images.shape[0]
                assert labels.tolist() == [i % K for i in record_of(images.numpy())]
            assert n == len(L.dataset) == COUNT
            assert seen == list(range(COUNT))  # sequential by default, each record once
    # float32 NCHW too (the short batch through the conversion)
    with ft.Loader(ds, batch_size=batch, dtype="float32", mean=0, std=1) as L:
        xs = [x for x, _ in L]
        assert sum(x.shape[0] for x in xs) == COUNT and xs[-1].shape[1:] == (3, H, W)


def test_dataset_and_sampler_attributes(ds):
    with ft.Loader(ds, batch_size=16, augment="rrc", size=4) as L:
        d = L.dataset
        assert len(d) == COUNT and d.classes == [f"class{c}" for c in range(K)]
        assert d.class_to_idx["class2"] == 2 and d.root == ds
        assert L.loader.order == "random"  # random augmentation: random order by default
        L.sampler.set_epoch(3)
        assert L.state_dict()["epoch"] == 3
    assert hasattr(d, "__len__")


def test_one_set_of_defaults(ds):
    with fastload.Loader(ds) as P, ft.Loader(ds) as T:
        assert P.order == T.loader.order == "seq" and not P.drop_last and not T.drop_last
        assert P.batch_size == T.batch_size == 256 and len(P) == len(T) == 1
        assert P.samples_per_epoch == COUNT
    for kw in (dict(augment="rrc"), dict(flip=True), dict(augment="rrc,flip")):
        with fastload.Loader(ds, size=4, **kw) as P:
            assert P.order == "random", kw
    with fastload.Loader(ds, augment="center", size=4) as P:
        assert P.order == "seq"
    with pytest.raises(TypeError):
        fastload.Loader(ds, 16)  # keyword-only options
    with pytest.raises(TypeError):
        ft.Loader(ds, 16)


def test_batch_transform(ds):
    calls = []

    def mix(images, labels):
        calls.append(images.shape[0])
        # a mixup-like step on the tensors: one-hot labels, images blended with their flip
        lam = 0.25
        onehot = torch.nn.functional.one_hot(labels, K).float()
        return lam * images + (1 - lam) * images.flip(0), lam * onehot + (1 - lam) * onehot.flip(0)

    with ft.Loader(ds, batch_size=16, dtype="float32", batch_transform=mix) as L:
        out = list(L)
    assert calls == [16] * 6 + [4] and out[0][1].shape == (16, K)
    assert torch.allclose(out[0][1].sum(1), torch.ones(16))
    with pytest.raises(ValueError):
        ft.Loader(ds, batch_transform=3)


def test_world_shares_like_distributed_sampler(ds):
    # sequential/random order, world 3, drop_last False: ceil(100/3) = 34 samples per rank (one
    # padded repeat on ranks 1 and 2, as DistributedSampler), batches 16, 16, 2
    shares = []
    for r in range(3):
        with fastload.Loader(ds, batch_size=16, rank=r, world=3, order="random", seed=1) as L:
            sizes = [len(labels) for _, labels in L]
            assert sizes == [16, 16, 2] and len(L) == 3 and L.samples_per_epoch == 34
            L.load_state_dict({"epoch": 0, "batch": 0})
            shares.append([int(i) for _ in L for i in L._current.indices])
    flat = sorted(i for s in shares for i in s)
    assert set(flat) == set(range(COUNT)) and len(flat) == 102
