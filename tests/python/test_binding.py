#!/usr/bin/python3
"""test_binding.py — tests of the Python binding (python/fastload) against the real libfastload.

Makes its own small raw dataset with known pixels (fl_py_make_dataset, a C fixture maker using
the writer API) and checks: exact pixels/labels in sequential order; zero-copy views of the batch
memory; batches identical to the C stream of `fastload digest` (SHA-256 per batch) with
random-resized-crop + flip; state_dict resume mid-epoch and at an epoch boundary; epoch iteration;
rank/world shares; fastload.Error naming the shard and record on a flipped byte (and skip mode);
torch tensors when torch is importable; set_workers mid-epoch (and from another thread, and
racing close) keeps the batches of a fixed-workers run, its errors; len() against iteration.
Environment (set by CTest): FASTLOAD_LIBRARY, FL_MAKE_DATASET, FASTLOAD_CLI, PYTHONPATH.
Run with pytest (tests/python/CMakeLists.txt): the methods of Tests are the test cases, on the
datasets of conftest.py. Skipped without numpy.
"""
import hashlib
import os
import re
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import fastload  # noqa: E402

MAKER = os.environ.get("FL_MAKE_DATASET")
CLI = os.environ.get("FASTLOAD_CLI")
COUNT, H, W, K = 100, 6, 8, 4


def expected_pixels(i):
    y, x, c = np.meshgrid(np.arange(H), np.arange(W), np.arange(3), indexing="ij")
    return ((int(i) * 7 + y * 13 + x * 29 + c * 71) & 255).astype(np.uint8)


def batch_sha(images, labels):
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(images).tobytes())
    h.update(np.asarray(labels).astype("<i4").tobytes())
    return h.hexdigest()


def make(path, *args):
    r = subprocess.run([MAKER, path, "--count", str(COUNT), "--height", str(H), "--width", str(W),
                        "--classes", str(K), *args], capture_output=True, text=True)
    assert r.returncode == 0, f"fixture maker failed: {r.stderr}"
    return r.stdout


# full batches only: `fastload digest` hashes the library's batches, whose tail is padded
AUG = dict(batch_size=16, augment="rrc", flip=True, size=(4, 5), order="random", seed=7, drop_last=True)
AUG_CLI = ["--batch", "16", "--augment", "rrc,flip", "--size", "5x4", "--order", "random", "--seed", "7",
           "--drop-last"]


class Tests:
    __test__ = False  # the cases run through the module-level functions below
    def __init__(self, tmp):
        self.tmp = tmp
        self.ds = os.path.join(tmp, "ds")
        make(self.ds)
        self.bad = os.path.join(tmp, "bad")
        make(self.bad)
        out = make(self.bad, "--corrupt", "5")
        self.bad_shard = os.path.basename(out.split()[0])

    def test_sequential_exact(self):
        with fastload.Loader(self.ds, batch_size=16, order="seq", workers=2) as L:
            assert len(L) == (COUNT + 15) // 16, len(L)
            assert L.dataset_size == COUNT
            seen = []
            for images, labels in L:
                b = L._current
                assert images.shape[1:] == (H, W, 3) and images.dtype == np.uint8, images.shape
                assert labels.dtype == np.int32
                for j, idx in enumerate(b.indices):
                    assert np.array_equal(images[j], expected_pixels(idx)), f"record {idx} pixels"
                    assert labels[j] == idx % K, f"record {idx} label {labels[j]}"
                seen.extend(int(v) for v in b.indices)
            # drop_last=False: every record once, the last batch short (COUNT % 16), as a DataLoader
            assert seen == list(range(COUNT)), seen
            assert L.samples_per_epoch == COUNT
            names = L.class_names
            assert names in ([], [f"class{c}" for c in range(K)]), names

    def test_zero_copy(self):
        with fastload.Loader(self.ds, batch_size=16, order="seq", workers=1) as L:
            b = L.next_batch()
            assert b.images.ctypes.data == b.address != 0 and not b.copied
            assert not b.images.flags.owndata and not b.labels.flags.owndata
            images, labels = b  # unpacks like a tuple
            assert images is b.images and labels is b.labels
            b.release()
            assert b.released
            with L.next_batch() as b2:
                assert b2.batch == 1
            assert b2.released
            # several batches may be held at once, each in its own slot
            held = [L.next_batch() for _ in range(2)]
            assert [h.batch for h in held] == [2, 3] and held[0].address != held[1].address
            del held, b, b2, images, labels
            assert L._ring.live == 0  # the slots went back with the arrays
        # a closed loader raises instead of touching freed memory
        for f in (len, lambda l: l.next_batch(), lambda l: l.state_dict()):
            try:
                f(L)
                raise AssertionError("closed loader accepted a call")
            except fastload.Error as e:
                assert "closed" in str(e)

    def test_matches_c_digest(self):
        if not CLI or not os.path.exists(CLI):
            print("  (fastload CLI not built: digest comparison skipped)")
            return
        cmd = [CLI, "digest", self.ds, *AUG_CLI, "--workers", "2", "--epochs", "2"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.split("\n")
        c_batches = [ln.split() for ln in lines if ln and not ln.startswith("stream")]
        c_stream = [ln.split()[1] for ln in lines if ln.startswith("stream")][0]
        stream = hashlib.sha256()
        py = []
        with fastload.Loader(self.ds, workers=1, **AUG) as L:
            for _ in range(2):
                for images, labels in L:
                    b = L._current
                    py.append([str(b.epoch), str(b.batch), str(len(labels)), batch_sha(images, labels)])
                    stream.update(images.tobytes())
                    stream.update(labels.astype("<i4").tobytes())
        assert py == c_batches, f"python stream differs from C digest:\n{py[:3]}\n{c_batches[:3]}"
        assert stream.hexdigest() == c_stream
        # the stream is the same with other worker counts and I/O modes, and through the binding
        with fastload.Loader(self.ds, workers=3, io="mmap", **AUG) as L:
            assert [batch_sha(b.images, b.labels) for b in L.batches(len(py))] == [x[3] for x in py]
        for extra in (["--workers", "1", "--io", "pread"], ["--workers", "3", "--direct"],
                      ["--workers", "2", "--io", "mmap"], ["--workers", "2", "--io", "uring"],
                      ["--workers", "2", "--io", "memory"]):
            r2 = subprocess.run([CLI, "digest", self.ds, *AUG_CLI, "--epochs", "2", *extra],
                                capture_output=True, text=True)
            assert r2.returncode == 0 and r2.stdout == r.stdout, (extra, r2.stderr)

    def _hashes(self, L, n):
        return [(b.epoch, b.batch, batch_sha(b.images, b.labels)) for b in L.batches(n)]

    def test_resume(self):
        total = 2 * ((COUNT + 15) // 16)
        with fastload.Loader(self.ds, workers=2, **AUG) as L:
            ref = self._hashes(L, total)
        for k in (3, (COUNT + 15) // 16, 9):
            with fastload.Loader(self.ds, workers=2, **AUG) as L:
                first = self._hashes(L, k)
                state = L.state_dict()
            assert first == ref[:k]
            assert (state["epoch"], state["batch"]) == ref[k][:2], (state, ref[k][:2])
            with fastload.Loader(self.ds, workers=1, **AUG) as L2:
                L2.load_state_dict(state)
                rest = self._hashes(L2, total - k)
            assert rest == ref[k:], f"resume after {k} batches differs"
            # resuming through the constructor gives the same
            with fastload.Loader(self.ds, workers=2, start_epoch=state["epoch"],
                                 start_batch=state["batch"], **AUG) as L3:
                assert self._hashes(L3, 2) == ref[k:k + 2]
        try:
            with fastload.Loader(self.ds, **dict(AUG, seed=8)) as L4:
                L4.load_state_dict({"epoch": 0, "batch": 1, "seed": 7})
            raise AssertionError("load_state_dict accepted another seed")
        except ValueError:
            pass

    def test_epochs_and_batches(self):
        with fastload.Loader(self.ds, batch_size=32, order="random", seed=1, drop_last=True) as L:
            assert len(L) == COUNT // 32
            epochs = []
            for e in range(3):
                got = [(L._current.epoch, L._current.batch) for _ in L]
                assert got == [(e, i) for i in range(COUNT // 32)], got
                epochs.append(e)
            bs = [(b.epoch, b.batch) for b in L.batches(4)]
            assert bs == [(3, 0), (3, 1), (3, 2), (4, 0)], bs
            st = L.stats()
            assert st["images"] >= 13 * 32 and st["io_backend"], st
            assert st["io"] == L.io and L.io.startswith(st["io_backend"]), (st, L.io)
        # how records are read, in words, and whether O_DIRECT is on (a filesystem that refuses
        # it gets buffered reads: then both say so)
        with fastload.Loader(self.ds, batch_size=32, io="pread", direct=True) as L:
            assert L.io.startswith("pread, "), L.io
            assert L.direct == ("O_DIRECT" in L.io), (L.direct, L.io)
        with fastload.Loader(self.ds, batch_size=32, io="pread") as L:
            assert not L.direct and "buffered" in L.io, L.io
        # random order: each epoch is a permutation (drop_last=False, no padding when it divides)
        with fastload.Loader(self.ds, batch_size=20, order="random", seed=3) as L:
            for _ in range(2):
                idx = np.concatenate([L._current.indices.copy() for _ in L])
                assert sorted(idx.tolist()) == list(range(COUNT))

    def test_rank_world(self):
        shares = []
        for r in range(3):
            with fastload.Loader(self.ds, batch_size=8, order="random", seed=5, rank=r, world=3,
                                 drop_last=True) as L:
                shares.append([int(v) for b in L for v in L._current.indices])
        assert len({len(s) for s in shares}) == 1, [len(s) for s in shares]
        flat = [v for s in shares for v in s]
        assert len(flat) == len(set(flat)), "rank shares overlap"

    def test_corrupt(self):
        try:
            with fastload.Loader(self.bad, batch_size=16, order="seq", workers=2) as L:
                for _ in L:
                    pass
            raise AssertionError("no error on a flipped byte")
        except fastload.Error as e:
            msg = str(e)
            assert self.bad_shard in msg, f"message does not name the shard {self.bad_shard}: {msg}"
            assert re.search(r"\b5\b", msg), f"message does not name record 5: {msg}"
            assert e.code < 0
        # drop_last: record 5 appears once per epoch (padding would repeat it); the stats may
        # count more when workers already prepared batches of the next epoch
        with fastload.Loader(self.bad, batch_size=16, order="seq", on_corrupt="skip",
                             drop_last=True) as L:
            skipped = 0
            for images, labels in L:
                b = L._current
                skipped += b.skipped
                assert 5 not in b.indices.tolist(), "corrupt record delivered"
                for j, idx in enumerate(b.indices):
                    assert np.array_equal(images[j], expected_pixels(idx)), f"record {idx} pixels"
            assert skipped == 1 and L.stats()["skipped"] >= 1, (skipped, L.stats())
        if CLI and os.path.exists(CLI):
            r = subprocess.run([CLI, "bench", self.bad, "--batch", "16"], capture_output=True, text=True)
            assert r.returncode == 1, (r.returncode, r.stderr)
            assert self.bad_shard in r.stderr and "error" in r.stderr, r.stderr
            assert len(r.stderr.strip().splitlines()) <= 2, r.stderr

    def test_bad_arguments(self):
        try:
            fastload.Loader(os.path.join(self.tmp, "missing"))
            raise AssertionError("missing dataset accepted")
        except fastload.Error as e:
            assert "missing" in str(e), str(e)
        for kw in (dict(order="sorted"), dict(augment="blur"), dict(io="aio"), dict(rank=2, world=2),
                   dict(decode="slow")):
            try:
                fastload.Loader(self.ds, **kw)
                raise AssertionError(f"accepted {kw}")
            except ValueError:
                pass

    def test_torch(self):
        try:
            import torch
        except ImportError:
            print("  (torch not importable: torch_batches test skipped)")
            return
        with fastload.Loader(self.ds, batch_size=16, order="seq", drop_last=True) as L:
            ref = [(b.images.copy(), b.labels.copy()) for b in L.batches(len(L))]
        with fastload.Loader(self.ds, batch_size=16, order="seq", drop_last=True) as L:
            got = list(fastload.torch_batches(L, normalize=True, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25)))
            assert len(got) == len(ref)
            for (x, y), (ri, rl) in zip(got, ref):
                want = (ri.astype(np.float32) / 255 - 0.5) / 0.25
                assert tuple(x.shape) == (16, 3, H, W) and x.dtype == torch.float32
                assert np.allclose(x.numpy(), want.transpose(0, 3, 1, 2), atol=1e-5)
                assert np.array_equal(y.numpy(), rl)
        with fastload.Loader(self.ds, batch_size=16, order="seq") as L:
            gen = fastload.torch_batches(L, normalize=False)
            x, y = next(gen)
            assert L._ring.live == 1 and x.data_ptr() == L._current.address  # zero-copy uint8 view
            assert tuple(x.shape) == (16, H, W, 3) and x.dtype == torch.uint8
            gen.close()
            L.release()
            assert L._ring.live == 1  # the tensor keeps the slot...
            del x, y
            assert L._ring.live == 0  # ...until it is garbage

    def test_example_pytorch_train(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            print("  (torch not importable: example test skipped)")
            return
        ex = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "pytorch_train.py")
        ck = os.path.join(self.tmp, "ck.pt")
        base = [sys.executable, ex, self.ds, "--model", "small", "--size", "8", "--batch", "16",
                "--workers", "2", "--device", "cpu", "--checkpoint", ck]
        r = subprocess.run(base + ["--epochs", "1", "--val", self.ds], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "epoch 0: loss" in r.stdout and "val top-1" in r.stdout, r.stdout
        r = subprocess.run(base + ["--epochs", "2"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "resumed from" in r.stdout and "epoch 1: loss" in r.stdout and "epoch 0:" not in r.stdout, r.stdout


@pytest.fixture(scope="module")
def T(datasets):
    t = Tests.__new__(Tests)
    t.tmp, t.ds, t.bad, t.bad_shard = datasets
    return t


def _case(name):
    def case(T):
        getattr(T, name)()
    case.__name__ = name
    return case


for _name in [n for n in dir(Tests) if n.startswith("test_")]:
    globals()[_name] = _case(_name)


# ---- decode workers at work: set_workers / active_workers (fl_loader_set_workers) -------------
WORKERS_KW = dict(batch_size=16, augment="rrc", flip=True, size=(4, 5), order="random", seed=11,
                  workers=4)


def _epoch_digests(ds, epochs=2, change=None, helper=None, **kw):
    """Per epoch: the sha256 of every batch (images, labels, indices) and the indices seen;
    change(L, epoch, batch) runs before each batch is asked for; helper(L, stop) runs in a
    thread of its own from the loader's creation until `stop` is set before its close."""
    import threading
    out = []
    with fastload.Loader(ds, **dict(WORKERS_KW, **kw)) as L:
        stop = threading.Event()
        t = threading.Thread(target=helper, args=(L, stop)) if helper else None
        if t:
            t.start()
        try:
            for e in range(epochs):
                shas, seen = [], []
                while True:
                    if change:
                        change(L, *L.position())
                    b = L.next_batch()
                    shas.append(batch_sha(b.images, b.labels) + hashlib.sha256(b.indices.tobytes()).hexdigest())
                    seen += b.indices.tolist()
                    if b.last_in_epoch:
                        break
                out.append((shas, seen))
        finally:
            stop.set()
            if t:
                t.join()
    return out


def test_set_workers_mid_epoch_same_batches(ds):
    """The library's promise (fastload.h, fl_loader_set_workers): batches stay byte-identical
    whichever workers decode. Changing the count mid-epoch, from the consumer and from another
    thread, gives the batches of a fixed-workers run; every sample once."""
    want = _epoch_digests(ds)
    assert len(want[0][0]) == (COUNT + 15) // 16
    for shas, seen in want:
        assert sorted(seen) == list(range(COUNT))  # every sample exactly once per epoch
    assert want[0][0] != want[1][0]
    plan = {(0, 1): 1, (0, 3): 3, (0, 5): 2, (1, 0): 1, (1, 4): 4, (1, 6): 2}

    def change(L, e, b):
        if (e, b) in plan:
            L.set_workers(plan[(e, b)])
            assert L.active_workers == plan[(e, b)] and L.workers == 4
    assert _epoch_digests(ds, change=change) == want
    # another thread changing the count all along (any thread, any time)
    calls = []

    def flipper(L, stop):
        while not stop.is_set():
            L.set_workers(1 + len(calls) % 4)
            calls.append(1)
    assert _epoch_digests(ds, helper=flipper) == want
    assert calls
    # the library's tail padding (drop_last=True, as `fastload digest` hashes) too
    want = _epoch_digests(ds, epochs=1, drop_last=True)
    assert _epoch_digests(ds, epochs=1, drop_last=True,
                          change=lambda L, e, b: L.set_workers(1 + b % 4)) == want


def test_set_workers_while_another_thread_closes(ds):
    """set_workers from a thread racing close() in the consumer: LoaderClosedError once closed,
    never a call on a freed loader (the ASan build would say)."""
    import threading
    for _ in range(5):
        L = fastload.Loader(ds, batch_size=16, workers=2)
        next(iter(L))
        L.release()
        started, result = threading.Event(), []

        def flipper():
            i = 0
            try:
                while True:
                    L.set_workers(1 + i % 2)
                    i += 1
                    started.set()
            except fastload.LoaderClosedError as e:
                result.append(e)
        t = threading.Thread(target=flipper)
        t.start()
        started.wait(10)
        L.close()
        t.join(10)
        assert not t.is_alive() and len(result) == 1 and "closed" in str(result[0])


def test_set_workers_errors(ds):
    L = fastload.Loader(ds, batch_size=16, workers=3)
    assert L.workers == 3 and L.active_workers == 3
    L.set_workers(2)
    for bad in (0, 4, -1, 2 ** 32, 2 ** 32 + 1):  # 2**32 + 1 would be 1 as a C uint32: refused
        with pytest.raises(fastload.InvalidOptionError) as ei:
            L.set_workers(bad)
        assert isinstance(ei.value, ValueError)
        assert str(ei.value).endswith(f"{bad} decode workers asked for: the loader has 3"), str(ei.value)
        assert L.active_workers == 2  # nothing changed
    for bad in (1.5, "2", None, True):
        with pytest.raises(fastload.InvalidOptionError, match="expected an integer"):
            L.set_workers(bad)
    with pytest.raises(ValueError):
        L.active_workers = 0
    L.active_workers = 1
    assert L.active_workers == 1
    L.set_workers(np.int64(3))  # any integer type
    assert L.active_workers == 3
    # kept across load_state_dict (a new C loader underneath)
    L.set_workers(1)
    L.load_state_dict({"epoch": 1, "batch": 2})
    assert L.active_workers == 1 and L.workers == 3
    assert sum(len(y) for _, y in L) == COUNT - 2 * 16
    L.close()
    for f in (lambda: L.workers, lambda: L.active_workers, lambda: L.set_workers(1)):
        with pytest.raises(fastload.LoaderClosedError):
            f()
    with fastload.Loader(ds, batch_size=16) as L:  # workers=0: one per online CPU
        assert L.workers == (os.sysconf("SC_NPROCESSORS_ONLN") or 1) == L.active_workers


@pytest.mark.parametrize("kw", [dict(batch_size=16), dict(batch_size=16, drop_last=True),
                                dict(batch_size=7, rank=1, world=3), dict(batch_size=10),
                                dict(batch_size=7, rank=2, world=3, drop_last=True),
                                dict(batch_size=5, rank=1, world=2, order="quasi", quasi_block=8),
                                dict(batch_size=9, rank=3, world=4, _exact_shares=True)])
def test_len_matches_iteration(ds, kw):
    """len(L) == the batches an epoch yields, samples_per_epoch == their samples, over 2 epochs."""
    with fastload.Loader(ds, workers=2, **kw) as L:
        for e in range(2):
            sizes = [len(y) for _, y in L]
            assert len(sizes) == len(L) == L.batches_per_epoch, (e, sizes, len(L))
            assert sum(sizes) == L.samples_per_epoch
            assert L.position() == (e + 1, 0)


def test_path_forms_and_home(ds, tmp_path, monkeypatch):
    """str, bytes and os.PathLike paths open the same data set; a leading ~ is expanded, as
    torchvision's ImageFolder does (a path ported from it must not fail as missing)."""
    import pathlib
    home = tmp_path / "home"
    home.mkdir()
    os.symlink(ds, home / "data")
    monkeypatch.setenv("HOME", str(home))
    digests = []
    for p in (ds, os.fsencode(ds), pathlib.Path(ds), "~/data", pathlib.Path("~/data")):
        with fastload.Loader(p, batch_size=8, workers=1, order="seq") as L:
            images, labels = next(iter(L))
            digests.append(hashlib.sha256(images.tobytes() + labels.tobytes()).hexdigest())
            assert L.path == os.path.expanduser(os.fspath(p))
    assert len(set(digests)) == 1
    with pytest.raises(fastload.DataIOError, match="~nosuchuser_fl/x"):
        fastload.Loader("~nosuchuser_fl/x", batch_size=8)
