"""test_processes.py — a Loader across copies and processes: copy.copy / deepcopy / pickle refused
(a copy shared the ring and freed it under the original); after os.fork a child that never touches
the Loader exits (close, garbage collection and exit only drop references: the library's threads,
locks and condition variables are the parent's), a child using it gets LoaderForkedError at once;
a torch DataLoader whose workers use a Loader of the parent gets that error, and one over
fastload.torch.Dataset with num_workers=2 sees every sample exactly once; set_workers / workers in
a forked child raise LoaderForkedError; len(DataLoader(Dataset, batch_size=None, num_workers=k)) is
the batches an epoch yields, the same ones for k = 0, 2, 3; a DataLoader worker's loader reads and
decodes its run of batches and none past it; set_epoch reaches persistent workers (fork, spawn); errors
raised in DataLoader workers reach the main process as their fastload class (DataIOError,
CorruptRecordError). Cases that hung before run in subprocesses with a
timeout."""
import copy
import hashlib
import os
import pickle
import subprocess
import sys
import textwrap
import time
import types

import pytest

np = pytest.importorskip("numpy")
import fastload  # noqa: E402
from conftest import COUNT, H, K, W  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def record_of(images):
    """Record index of each image of the fixture: pixel (0, 0, 0) = 7 i mod 256, a bijection on
    [0, 256) (7 * 183 = 1 mod 256)."""
    return ((np.asarray(images)[:, 0, 0, 0].astype(np.int64) * 183) % 256).tolist()


def run_py(code, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "..", "python"),
                                                       os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=timeout)


def test_copy_and_pickle_refused(ds):
    with fastload.Loader(ds, batch_size=16, workers=2) as L:
        next(iter(L))
        for f in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError) as ei:
                f(L)
            assert "cannot be" in str(ei.value) and "Loader" in str(ei.value)
        L.load_state_dict({"epoch": 0, "batch": 0})
        idx = [i for images, _ in L for i in record_of(images)]
        assert idx == list(range(COUNT))  # the original is unharmed


def test_copy_refused_torch(ds):
    ft = pytest.importorskip("fastload.torch")
    pytest.importorskip("torch")
    with ft.Loader(ds, batch_size=16) as L:
        for f in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError):
                f(L)
        assert sum(len(y) for _, y in L) == COUNT


def test_fork_child_exits_and_refuses(ds):
    r = run_py(f"""
        import gc, os, sys, time
        import fastload
        L = fastload.Loader({ds!r}, batch_size=16, workers=2, order="seq")
        it = iter(L)
        held = next(it)          # a batch held across the fork, its workers busy
        def child(action):
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    if action == "use":
                        try:
                            next(iter(L))
                            code = 3
                        except fastload.LoaderForkedError as e:
                            code = 0 if "each" in str(e) and "worker_init_fn" in str(e) else 4
                        except Exception as e:
                            print("unexpected", type(e), e, file=sys.stderr)
                            code = 5
                    elif action == "workers":  # set_workers / workers: the same refusal
                        code = 0
                        for f in (lambda: L.set_workers(1), lambda: L.workers):
                            try:
                                f()
                                code = 7
                            except fastload.LoaderForkedError:
                                pass
                    elif action == "close":
                        L.close()
                    elif action == "drop":
                        global held
                        held = None
                        gc.collect()
                except BaseException as e:
                    print("child", action, repr(e), file=sys.stderr)
                    code = 6
                sys.exit(code)   # a normal exit: finalizers run (they used to hang here)
            t0 = time.time()
            while time.time() - t0 < 20:
                p, st = os.waitpid(pid, os.WNOHANG)
                if p:
                    return os.waitstatus_to_exitcode(st)
                time.sleep(0.02)
            os.kill(pid, 9)
            return "hang"
        for action in ("exit", "close", "drop", "use", "workers"):
            rc = child(action)
            assert rc == 0, (action, rc)
        # the parent goes on as if nothing happened
        rest = [b.batch for b in it]
        assert rest == list(range(1, len(L))), rest
        L.close()
        print("ok")
    """)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stdout, r.stderr[-3000:])


def test_dataloader_workers_with_parents_loader(ds):
    pytest.importorskip("torch")
    r = run_py(f"""
        import torch, fastload
        L = fastload.Loader({ds!r}, batch_size=16, workers=2)
        class Wrap(torch.utils.data.IterableDataset):
            def __iter__(self):
                for images, labels in L:
                    yield torch.from_numpy(labels.copy())
        dl = torch.utils.data.DataLoader(Wrap(), batch_size=None, num_workers=2)
        try:
            list(dl)
            print("no error")
        except fastload.LoaderForkedError as e:  # the worker's class, re-raised by the DataLoader
            assert "worker_init_fn" in str(e), str(e)
            print("refused")
        # the parent's loader still works
        assert sum(len(l) for _, l in L) == {COUNT}
        print("ok")
    """, timeout=120)
    assert r.returncode == 0 and "refused" in r.stdout and "ok" in r.stdout, \
        (r.returncode, r.stdout, r.stderr[-3000:])


@pytest.mark.parametrize("num_workers,order,batch", [(2, "random", 16), (2, "seq", 7), (0, "random", 16),
                                                     (3, "random", 5)])
def test_dataloader_workers_every_sample_once(ds, num_workers, order, batch):
    torch = pytest.importorskip("torch")
    import fastload.torch as ft
    d = ft.Dataset(ds, batch_size=batch, order=order, seed=4, augment="none", workers=1)
    dl = torch.utils.data.DataLoader(d, batch_size=None, num_workers=num_workers)
    epochs = []
    for e in range(2):
        d.set_epoch(e)
        seen = []
        for images, labels in dl:
            assert images.dtype == torch.uint8 and tuple(images.shape[1:]) == (H, W, 3)
            assert 0 < len(labels) <= batch
            idx = record_of(images.numpy())
            assert labels.tolist() == [i % K for i in idx]
            seen += idx
        assert sorted(seen) == list(range(COUNT)), (e, sorted(seen))  # every sample exactly once
        epochs.append(seen)
    if order == "random" and num_workers:
        assert epochs[0] != epochs[1]  # set_epoch moved the shuffle on
    # drop_last=True: full batches only, none twice
    d = ft.Dataset(ds, batch_size=batch, order=order, seed=4, drop_last=True, workers=1)
    seen = []
    for images, labels in torch.utils.data.DataLoader(d, batch_size=None, num_workers=num_workers):
        assert len(labels) == batch
        seen += record_of(images.numpy())
    assert len(seen) == len(set(seen)) and len(seen) >= COUNT - max(1, num_workers) * batch


def test_dataset_pickles_for_spawn(ds):
    pytest.importorskip("torch")
    import fastload.torch as ft
    d = ft.Dataset(ds, batch_size=16, dtype="float32")
    d2 = pickle.loads(pickle.dumps(d))  # what a spawn/forkserver DataLoader worker receives
    assert d2.path == d.path and d2.kwargs == d.kwargs
    x, y = next(iter(d2))
    assert tuple(x.shape) == (16, 3, H, W)


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_dataset_set_epoch_reaches_persistent_workers(ds, ctx):
    # persistent_workers=True keeps the workers' copies of the Dataset across epochs: set_epoch on
    # the main process's copy must still reach them (before: every epoch the same order)
    torch = pytest.importorskip("torch")
    import fastload.torch as ft

    def orders(persistent):
        d = ft.Dataset(ds, batch_size=16, order="random", seed=4, workers=1)
        dl = torch.utils.data.DataLoader(d, batch_size=None, num_workers=2,
                                         persistent_workers=persistent,
                                         multiprocessing_context=ctx)
        out = []
        for e in range(3):
            d.set_epoch(e)
            out.append([i for images, _ in dl for i in record_of(images.numpy())])
        return out

    persistent, fresh = orders(True), orders(False)
    assert persistent == fresh  # the same epochs as workers started anew each epoch
    assert persistent[0] != persistent[1] != persistent[2]
    assert all(sorted(o) == list(range(COUNT)) for o in persistent)


def test_dataset_copies_have_their_own_epoch(ds):
    pytest.importorskip("torch")
    import fastload.torch as ft
    d = ft.Dataset(ds, batch_size=16)
    d.set_epoch(4)
    d2, d3 = pickle.loads(pickle.dumps(d)), copy.deepcopy(d)
    assert d2.epoch == d3.epoch == 4
    d2.set_epoch(7)
    d3.set_epoch(8)
    assert (d.epoch, d2.epoch, d3.epoch) == (4, 7, 8)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # 3 workers on 2 cores
@pytest.mark.parametrize("kw", [dict(batch_size=16), dict(batch_size=16, drop_last=True),
                                dict(batch_size=7, order="seq"), dict(batch_size=3),
                                dict(batch_size=9, rank=1, world=3),
                                dict(batch_size=6, rank=2, world=3, drop_last=True),
                                dict(batch_size=4, rank=1, world=2, order="quasi", quasi_block=8),
                                dict(batch_size=60, rank=1, world=2)])
def test_dataset_len_is_what_the_dataloader_yields(ds, kw):
    """len(DataLoader(ds, batch_size=None, num_workers=k)) == the items an epoch yields, for
    k = 0, 2, 3 (a worker may have no batch: batch_size=60 on rank 1 of 2 is one batch); the
    batches are those of fastload.torch.Loader for the rank whatever k (every sample once with
    drop_last=False over the ranks), drop_last honoured."""
    torch = pytest.importorskip("torch")
    import fastload.torch as ft
    kw = dict(dict(seed=4, workers=1, augment="rrc", flip=True, size=(4, 5)), **kw)
    rank, world = kw.pop("rank", 0), kw.pop("world", 1)
    # the rank's share without DistributedSampler's padding when drop_last=False (as the Dataset)
    with ft.Loader(ds, rank=rank, world=world, _exact_shares=not kw.get("drop_last"), **kw) as L:
        L.set_epoch(1)
        want = sorted(hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()
                      for x, y in L)
        assert len(want) == len(L)
    d = ft.Dataset(ds, rank=rank, world=world, **kw)
    assert len(d) == len(want)
    d.set_epoch(1)
    for k in (0, 2, 3):
        dl = torch.utils.data.DataLoader(d, batch_size=None, num_workers=k)
        got = sorted(hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()
                     for x, y in dl)
        assert len(dl) == len(got) == len(want), (k, len(dl), len(got))
        assert got == want, k
    if not kw.get("drop_last"):  # every record once over the ranks
        seen = []
        for r in range(world):
            dr = ft.Dataset(ds, rank=r, world=world, **dict(kw, augment="none", flip=False, size=None))
            dl = torch.utils.data.DataLoader(dr, batch_size=None, num_workers=2)
            got = [i for x, _ in dl for i in record_of(x.numpy())]
            assert len(dl) == -(-len(got) // kw["batch_size"])
            seen += got
        assert sorted(seen) == list(range(COUNT))


def test_dataset_worker_reads_only_its_run(ds, monkeypatch):
    """A DataLoader worker's loader ends with the worker's run of batches (the library's
    max_batches): it yields the run's batches of fastload.torch.Loader, in order, and reads and
    decodes no record past them (without the end its workers filled the ring a few batches past
    the run, thrown away)."""
    torch = pytest.importorskip("torch")
    import fastload.torch as ft

    def digest(x, y):
        return hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()

    kw = dict(batch_size=7, seed=4, workers=2, augment="rrc", flip=True, size=(4, 5),
              order="random")
    with ft.Loader(ds, _exact_shares=True, **kw) as L:
        L.set_epoch(1)
        want = [digest(x, y) for x, y in L]
    with fastload.Loader(ds, batch_size=1, workers=1, _max_batches=1) as L1:
        next(iter(L1))
        rec = L1.stats()["bytes_read"]  # the fixture's records all have this stored size
        with pytest.raises(fastload.Error, match="max_batches"):
            L1.next_batch()  # past the end
    stats = []

    class Recording(ft.Loader):
        def close(self):
            if self._loader is not None and self._loader._handle is not None:
                time.sleep(0.2)  # room for a worker that went on past the run to read
                stats.append(self._loader.stats())
            super().close()

    monkeypatch.setattr(ft, "Loader", Recording)
    d = ft.Dataset(ds, **kw)
    d.set_epoch(1)
    n, nw = len(d), 3
    assert n == len(want) == 15
    for wid in range(nw):
        info = types.SimpleNamespace(num_workers=nw, id=wid)
        monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: info)
        stats.clear()
        got = [digest(x, y) for x, y in d]
        first, end = n * wid // nw, n * (wid + 1) // nw
        assert got == want[first:end], wid
        (s,) = stats
        assert s["batches"] == end - first
        # every position of a batch is a read (the short last batch is filled by wrap-around)
        assert s["bytes_read"] == (end - first) * kw["batch_size"] * rec, (wid, s["bytes_read"])


def test_dataset_len_errors(ds, tmp_path):
    torch = pytest.importorskip("torch")  # noqa: F841
    import fastload.torch as ft
    with pytest.raises(fastload.DataIOError):
        len(ft.Dataset(str(tmp_path / "missing"), batch_size=4))
    d = ft.Dataset(ds, batch_size=COUNT + 1, drop_last=True)  # the library's message
    with pytest.raises(fastload.InvalidOptionError, match="give no full batch of 101 per rank"):
        len(d)
    with pytest.raises(fastload.InvalidOptionError, match="give no full batch of 101 per rank"):
        next(iter(d))
    with pytest.raises(fastload.InvalidOptionError):
        len(ft.Dataset(ds, batch_size=4, order="sideways"))


def test_dataloader_worker_errors_keep_their_class(datasets, tmp_path):
    """torch's DataLoader re-raises a worker's exception as its class called with the text alone:
    a missing data set must come out as DataIOError (an OSError; its errno is not in the text),
    a corrupt record as CorruptRecordError, not as a RuntimeError."""
    torch = pytest.importorskip("torch")
    import fastload.torch as ft
    _, _, bad, _ = datasets
    missing = ft.Dataset(str(tmp_path / "missing"), batch_size=4, workers=1)
    with pytest.raises(fastload.DataIOError, match="missing") as e:
        for _ in torch.utils.data.DataLoader(missing, batch_size=None, num_workers=1):
            pass  # (not list(): it calls len(), which raises in this process)
    assert isinstance(e.value, OSError) and e.value.errno is None
    corrupt = ft.Dataset(bad, batch_size=4, order="seq", workers=1)
    with pytest.raises(fastload.CorruptRecordError, match="record 5"):
        for _ in torch.utils.data.DataLoader(corrupt, batch_size=None, num_workers=1):
            pass
