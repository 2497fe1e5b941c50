"""test_safety.py — safe batches by construction and the error classes.

Arrays keep their ring slot while they (or views) live; close() never frees memory an array still
uses; list(L.epoch()) is correct; a Batch copies, deep-copies and pickles (the copies holding no
slot); a second consumer thread gets RuntimeError; positions and states
are range-checked, size= too; a KeyboardInterrupt loses no batch; errors come as fastload.Error subclasses.
Cases that crashed or hung before run in a subprocess or a daemon thread, so they fail, not kill.
"""
import errno
import gc
import os
import subprocess
import sys
import textwrap
import threading

import pytest

np = pytest.importorskip("numpy")
import fastload  # noqa: E402
from conftest import COUNT, H, K, W  # noqa: E402


def expected_pixels(i):
    y, x, c = np.meshgrid(np.arange(H), np.arange(W), np.arange(3), indexing="ij")
    return ((int(i) * 7 + y * 13 + x * 29 + c * 71) & 255).astype(np.uint8)


def check_batch(images, labels, indices):
    for j, idx in enumerate(indices):
        assert np.array_equal(images[j], expected_pixels(idx)), f"record {idx}: wrong pixels"
        assert labels[j] == idx % K, f"record {idx}: label {labels[j]}"


def run_py(code):
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_array_after_close_keeps_memory(ds):
    r = run_py(f"""
        import numpy as np, fastload
        L = fastload.Loader({ds!r}, batch_size=16, order="seq", workers=2)
        images, labels = next(iter(L))
        view = images[3:5]
        ref, lref = images.copy(), labels.copy()
        L.close()
        for _ in range(3):
            junk = [np.ones(1 << 20, np.uint8) for _ in range(8)]  # reuse of freed memory
        assert np.array_equal(images, ref) and np.array_equal(labels, lref)
        assert np.array_equal(view, ref[3:5])
        images[:] = 0  # still writable memory of its own
        del images, labels, view  # the last arrays: the ring is freed now
        print("ok")
    """)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stderr[-2000:])


def test_list_epoch_is_correct(ds):
    for kw in (dict(workers=2, prefetch=4), dict(workers=1, prefetch=3), dict(workers=3, prefetch=2)):
        with fastload.Loader(ds, batch_size=16, order="seq", **kw) as L:
            bs = list(L.epoch())
            assert len(bs) == len(L) == (COUNT + 15) // 16, kw
            assert [b.batch for b in bs] == list(range(len(L)))
            for b in bs:
                check_batch(b.images, b.labels, b.indices)
            assert len({b.address for b in bs}) == len(bs), "two batches share memory"
            assert any(b.copied for b in bs)  # more batches than ring slots: the rest are copies
            # the next epoch reuses the slots the list gave back
            del bs, b
            gc.collect()
            for images, labels in L:
                check_batch(images, labels, L._current.indices)


def test_views_keep_the_slot(ds):
    with fastload.Loader(ds, batch_size=16, order="seq", workers=2, prefetch=4) as L:
        b = L.next_batch()
        view = b.images[2:4, 1:]
        idx = b.indices[2:4].copy()
        del b
        for images, labels in L.batches(3 * len(L)):  # many times around the ring
            check_batch(images, labels, L._current.indices)


        for j, i in enumerate(idx):
            assert np.array_equal(view[j], expected_pixels(i)[1:]), "view overwritten"


def test_batch_copies_and_pickles(ds):
    """A Batch is kept as users keep things: copy.copy (same arrays, same slot), copy.deepcopy and
    pickle (torch.save, a multiprocessing queue) give a Batch of arrays of its own with the same
    values and attributes, no device buffers, and hold no slot (before: TypeError, Batch.__new__
    missing arguments)."""
    import copy
    import pickle
    with fastload.Loader(ds, batch_size=16, order="seq", workers=2, prefetch=4) as L:
        b = L.next_batch()
        assert not b.copied and L._ring.live == 1
        c = copy.copy(b)
        assert type(c) is fastload.Batch and c.images is b.images and c.address == b.address
        d = copy.deepcopy(b)
        p = pickle.loads(pickle.dumps(b))
        for x in (d, p):
            assert type(x) is fastload.Batch
            images, labels = x
            assert images is x.images and labels is x.labels
            assert np.array_equal(images, b.images) and np.array_equal(labels, b.labels)
            assert np.array_equal(x.indices, b.indices) and x.indices is not b.indices
            assert images.flags.owndata or images.base is not b.images.base
            assert x.address == images.ctypes.data != b.address
            assert (x.epoch, x.batch, x.size, x.last_in_epoch) == (0, 0, 16, False)
            assert x.device_images is None and x.stream is None
            check_batch(images, labels, x.indices)
        del b, c, images, labels, x
        gc.collect()
        assert L._ring.live == 0  # the copies hold no slot
        check_batch(d.images, d.labels, d.indices)
        check_batch(p.images, p.labels, p.indices)


def test_plain_loop_is_zero_copy(ds):
    with fastload.Loader(ds, batch_size=16, order="seq", workers=2) as L:
        for _ in range(3):
            for images, labels in L:
                b = L._current
                assert not b.copied and not images.flags.owndata
                assert images.ctypes.data == b.address != 0
        assert L._ring.live <= 1


def test_second_consumer_thread(ds):
    with fastload.Loader(ds, batch_size=16, order="seq", workers=2) as L:
        it = iter(L)
        next(it)
        got = []

        def other():
            try:
                for _ in L:
                    pass
                got.append("no error")
            except RuntimeError as e:
                got.append(e)
        t = threading.Thread(target=other, daemon=True)
        t.start()
        t.join(20)
        assert not t.is_alive(), "second consumer thread hangs"
        assert isinstance(got[0], RuntimeError) and "thread" in str(got[0]), got
        assert next(it).batch == 1  # the first thread goes on
        # arrays dropped on another thread give their slots back through the consumer
        held = [L.next_batch() for _ in range(2)]
        t = threading.Thread(target=held.clear)
        t.start()
        t.join()
        for b in L.batches(2 * len(L)):
            pass
        del b, it
        L._ring.drain()  # what the consumer's next call does first: give the dead slots back
        assert L._ring.live == 0 and not L._ring.held and not L._ring.dead


def test_positions_are_range_checked(ds):
    with fastload.Loader(ds, batch_size=16, order="seq", workers=2) as L:
        next(iter(L))
        pos = L.position()
        for st in ({"epoch": -1, "batch": 0}, {"epoch": 0, "batch": -1}, {"epoch": 0, "batch": len(L)},
                   {"epoch": 1 << 62, "batch": 0}, {"epoch": "x", "batch": 0}, {"epoch": 1.5, "batch": 0},
                   {"epoch": 0}, "junk", None, {"epoch": 0, "batch": 0, "seed": "s"}):
            with pytest.raises(ValueError):
                L.load_state_dict(st)
            assert L.position() == pos, st  # unchanged, still open
        L.load_state_dict({"epoch": 2, "batch": 3})
        assert L.position() == (2, 3) and L.next_batch().batch == 3
    for kw in (dict(start_epoch=-1), dict(start_batch=-1), dict(start_batch=(COUNT + 15) // 16),
               dict(start_epoch=1 << 62), dict(start_epoch=0.5), dict(batch_size=0), dict(rank=-1),
               dict(world=0)):
        with pytest.raises(ValueError):
            fastload.Loader(ds, batch_size=kw.pop("batch_size", 16), **kw)


def test_size_forms_and_errors(ds):
    """size= takes what scripts compute it as: numpy and 0-d torch integers, a pair of them (a
    random size per epoch drawn with numpy raised "'numpy.int64' object is not iterable"); a
    negative, too large, fractional or one-sided size is an InvalidOptionError naming size (a
    negative one wrapped to a 4 G-pixel side: a DataIOError about a 2^64-byte batch slot)."""
    forms = [(np.int64(4), (4, 4)), ((np.int32(4), np.uint16(5)), (4, 5)), ([4.0, 5.0], (4, 5)),
             ((4, 5), (4, 5)), (4, (4, 4))]
    try:
        import torch
        forms += [(torch.tensor(4), (4, 4)), (torch.Size([4, 5]), (4, 5))]
    except ImportError:
        pass
    for size, hw in forms:
        with fastload.Loader(ds, batch_size=4, order="seq", size=size, workers=1) as L:
            assert L.next_batch().images.shape == (4,) + hw + (3,), size
    for size in (-5, (4, -1), (4, 1 << 32), 4.5, (4.5, 5), (4,), (4, 5, 6), True, "4", object()):
        with pytest.raises(fastload.InvalidOptionError, match="size="):
            fastload.Loader(ds, batch_size=4, size=size)


def test_flag_and_count_options_refuse_what_would_wrap_or_flip(ds):
    """Yes/no options take bools (numpy's too) and 0/1: drop_last="False" turned drop_last on
    (bool of a non-empty string), so a user asking for every sample silently lost the last
    batch. Counts are checked against their C fields: quasi_block=-1 wrapped to a 4 G-record
    block, workers=-1 to 4 G threads. The memory sizes are int64 and keep their negative
    meaning."""
    with fastload.Loader(ds, batch_size=16, order="seq", workers=1, drop_last=np.bool_(True),
                         pinned=0, jpeg_index_memory=-1, decode_memory=-1) as L:
        assert L.drop_last is True
    for name, bad in (("drop_last", "False"), ("drop_last", 2), ("direct", "no"),
                      ("pinned", None), ("flip", "False"), ("drop_last", 0.0)):
        with pytest.raises(fastload.InvalidOptionError, match=name):
            fastload.Loader(ds, batch_size=16, **{name: bad})
    for name, bad in (("quasi_block", -1), ("quasi_window", -2), ("workers", -1),
                      ("prefetch", 1 << 32), ("queue_depth", -4), ("channels", -3),
                      ("jpeg_index_memory", 1 << 63), ("decode_memory", "1G"),
                      ("memory_max", 2.5)):
        with pytest.raises(fastload.InvalidOptionError, match=name):
            fastload.Loader(ds, batch_size=16, **{name: bad})


class _InterruptAfterNext:
    """Library proxy: the n-th fl_loader_next returns, then a KeyboardInterrupt arrives (as a
    Ctrl-C during the C call is raised when it returns)."""

    def __init__(self, lib, n):
        self._lib, self._n = lib, n

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def fl_loader_next(self, *args):
        rc = self._lib.fl_loader_next(*args)
        self._n -= 1
        if self._n == 0:
            raise KeyboardInterrupt
        return rc


def test_keyboard_interrupt_loses_no_batch(ds):
    with fastload.Loader(ds, batch_size=16, order="seq", workers=2) as L:
        got = []
        L._lib = _InterruptAfterNext(L._lib, 3)
        with pytest.raises(KeyboardInterrupt):
            for images, labels in L:
                got.append(L._current.batch)
        assert got == [0, 1]
        assert L.state_dict()["batch"] == 2 and L.position() == (0, 2)
        rest = [b.batch for b in L]  # the interrupted batch comes next
        assert rest == list(range(2, len(L)))


def test_slot_dead_before_commit(ds):
    """A Ctrl-C after next_batch made a batch's slot but before it committed the batch: the slot
    can die before anything hashed its weakref (which then cannot be hashed at all); the next
    call's drain must pass over it (it raised TypeError 'weak object has gone away': seen once in
    the SIGINT soak under ASan) and the batch still comes next."""
    with fastload.Loader(ds, batch_size=16, order="seq", workers=2) as L:
        first = L.next_batch()
        r = L._ring
        s, wr = r.hold()  # as next_batch does, then the interrupt: the slot dies uncommitted
        del s
        gc.collect()
        assert r.dead == [wr] and wr() is None
        b = L.next_batch()
        assert r.dead == [] and (first.batch, b.batch) == (0, 1) and not b.copied
        check_batch(b.images, b.labels, [int(i) for i in b.indices])
        assert r.live == 2


def test_closed_loader_raises_valueerror(ds):
    L = fastload.Loader(ds, batch_size=16)
    L.close()
    for f in (len, lambda l: l.next_batch(), lambda l: l.state_dict(), lambda l: list(l),
              lambda l: l.load_state_dict({"epoch": 0, "batch": 0})):
        with pytest.raises(ValueError) as ei:
            f(L)
        assert isinstance(ei.value, fastload.LoaderClosedError)
        assert isinstance(ei.value, fastload.Error) and "closed" in str(ei.value)


def test_error_classes(datasets):
    tmp, ds, bad, bad_shard = datasets
    with pytest.raises(fastload.CorruptRecordError) as ei:
        with fastload.Loader(bad, batch_size=16, order="seq", workers=2) as L:
            for _ in L:
                pass
    assert isinstance(ei.value, fastload.Error) and ei.value.code < 0 and bad_shard in str(ei.value)
    with pytest.raises(OSError) as ei:
        fastload.Loader(os.path.join(tmp, "missing"))
    assert isinstance(ei.value, fastload.DataIOError) and isinstance(ei.value, fastload.Error)
    assert ei.value.errno == errno.ENOENT and "missing" in str(ei.value)
    # bad options: the binding's own checks and the library's (FL_E_INVALID) are ValueErrors
    for kw in (dict(order="sorted"), dict(prefetch=70000), dict(batch_size=COUNT + 1, drop_last=True)):
        with pytest.raises(ValueError) as ei:
            fastload.Loader(ds, **kw)
        assert isinstance(ei.value, fastload.InvalidOptionError), kw


def _indices(L, n=None):
    return [int(i) for b in (L if n is None else L.batches(n)) for i in L._current.indices]


def test_state_of_other_settings_refused_or_converted(ds):
    base = dict(order="random", seed=2, workers=2)
    with fastload.Loader(ds, batch_size=8, **base) as L:
        for _ in range(2):
            L.next_batch()
        st2 = L.state_dict()  # 16 samples done: batch 1 of a batch size of 16
        L.next_batch()
        st3 = L.state_dict()  # 24 samples done: no batch boundary at 16
        rest = _indices(L)
    assert st2["batch_size"] == 8 and st2["world"] == 1 and st2["order"] == "random"
    with fastload.Loader(ds, batch_size=16, **base) as L16:
        full = _indices(L16)
        L16.load_state_dict(st2)  # converted exactly
        assert L16.position() == (0, 1) and _indices(L16) == full[16:]
        with pytest.raises(fastload.InvalidOptionError) as ei:
            L16.load_state_dict(st3)
        assert "batch_size=8" in str(ei.value) and "batch_size=16" in str(ei.value)
        L16.load_state_dict(dict(st3, batch=0))  # an epoch start fits any batch size
    with fastload.Loader(ds, batch_size=8, **base) as L8:
        L8.load_state_dict(st3)
        assert _indices(L8) == rest
    for kw, name in ((dict(world=2, rank=1), "world"), (dict(order="quasi"), "order"),
                     (dict(drop_last=True), "drop_last")):
        with fastload.Loader(ds, batch_size=8, **dict(base, **kw)) as L:
            pos = L.position()
            with pytest.raises(fastload.InvalidOptionError) as ei:
                L.load_state_dict(st2)
            assert f"{name}=" in str(ei.value), str(ei.value)
            assert L.position() == pos
            L.load_state_dict(dict(st2, batch=0))
    q = dict(base, order="quasi", quasi_block=4)
    with fastload.Loader(ds, batch_size=8, **q) as L:
        L.next_batch()
        stq = L.state_dict()
    assert stq["quasi_block"] == 4
    with fastload.Loader(ds, batch_size=8, **dict(q, quasi_block=8)) as L:
        with pytest.raises(fastload.InvalidOptionError) as ei:
            L.load_state_dict(stq)
        assert "quasi_block=4" in str(ei.value)
    with fastload.Loader(ds, batch_size=16, **q) as L:  # quasi: no conversion of batch sizes
        with pytest.raises(fastload.InvalidOptionError):
            L.load_state_dict(dict(stq, batch=2))
    # a state of another data set (another record count)
    with fastload.Loader(ds, batch_size=8, **base) as L:
        with pytest.raises(fastload.InvalidOptionError) as ei:
            L.load_state_dict(dict(st2, records=COUNT + 1))
        assert "records=" in str(ei.value)
        L.load_state_dict({"epoch": 0, "batch": 2, "seed": 2})  # an older state: taken as it is
        assert L.position() == (0, 2)


@pytest.mark.parametrize("mode", ["numpy", "torch"])
def test_sigint_soak(ds, mode):
    """SIGINT every 0.1-2 ms during 300 batches, 50 runs (torch: 2; FL_LONG_TESTS=1: 20): no batch
    lost, repeated or out of order, no slot leaked, no interrupt swallowed by a finalizer."""
    long = os.environ.get("FL_LONG_TESTS") == "1"
    if mode == "torch":
        pytest.importorskip("torch")
        args = ["20" if long else "2", "300", "--torch"]
    else:
        args = ["50", "300"]
    soak = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sigint_soak.py")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    r = subprocess.run([sys.executable, soak, ds, *args], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "Exception ignored" not in r.stderr, r.stderr[-3000:]
    assert " 0 failed" in r.stdout.splitlines()[-1], r.stdout[-2000:]
