"""test_torch.py — fastload.torch.Loader on the CPU: tensors equal the numpy
batches (uint8 zero-copy, float32/bf16/fp16 NCHW and channels_last against a reference computed
from the uint8 batch), len, set_epoch, exact mid-epoch resume, rank/world from the environment and
from torch.distributed (gloo, world 1), tensors valid after the loader moves on and after close,
errors as fastload.errors classes, workers / set_workers passed through (same batches), len against
iteration. No GPU here: the CUDA paths run only against fake streams and
events (test_cuda_paths_fake_streams: the order of copy, wait, conversion and slot release)."""
import gc
import os
import subprocess
import sys
import textwrap
import contextlib
import ctypes

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
import fastload  # noqa: E402
import fastload.torch as ft  # noqa: E402
from conftest import COUNT, H, W  # noqa: E402

BS = 16


def plain_epoch(ds, epoch=0, **kw):
    """(images, labels) copies of one epoch of the plain Loader."""
    kw = dict(dict(batch_size=BS, order="random", seed=3, workers=2, drop_last=True), **kw)
    with fastload.Loader(ds, start_epoch=epoch, **kw) as L:
        return [(i.copy(), l.copy()) for i, l in L]


def reference(images, mean, std):
    x = images.astype(np.float64).transpose(0, 3, 1, 2) / 255.0
    m = np.asarray(mean, np.float64).reshape(1, -1, 1, 1)
    s = np.asarray(std, np.float64).reshape(1, -1, 1, 1)
    return (x - m) / s


def test_uint8_nhwc_zero_copy(ds):
    ref = plain_epoch(ds)
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="random", seed=3, workers=2) as L:
        assert len(L) == len(ref) == COUNT // BS
        got = list(L)  # held all at once: each tensor keeps its slot (or is a copy)
    assert len(got) == len(ref)
    for (x, y), (ri, rl) in zip(got, ref):
        assert x.dtype == torch.uint8 and tuple(x.shape) == (BS, H, W, 3)
        assert y.dtype == torch.int64 and y.device.type == "cpu"
        assert np.array_equal(x.numpy(), ri) and np.array_equal(y.numpy(), rl)


def test_zero_copy_keeps_slot(ds):
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="seq", workers=2, prefetch=4) as L:
        it = iter(L)
        x, y = next(it)
        ring = L.loader._ring
        assert ring.live == 1  # the tensor holds the slot: no copy was made
        want = x.clone()
        more = [next(it) for _ in range(3)]  # the loader moves on
        del more
        gc.collect()
        assert ring.live == 1 and torch.equal(x, want)
        del it
    # closed: the tensor still has its memory
    junk = [np.ones(1 << 20, np.uint8) for _ in range(8)]
    del junk
    assert torch.equal(x, want) and ring.handle is not None
    del x, y
    gc.collect()
    assert ring.handle is None  # the last tensor gone: the ring is freed


@pytest.mark.parametrize("dtype,layout", [(torch.float32, "nchw"), (torch.float32, "channels_last"),
                                          ("bfloat16", "nchw"), (torch.bfloat16, "channels_last"),
                                          (torch.float16, "nchw")])
def test_float_conversion(ds, dtype, layout):
    ref = plain_epoch(ds)
    dt = {"bfloat16": torch.bfloat16}.get(dtype, dtype)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # the default for 3 channels
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="random", seed=3, workers=2, dtype=dtype, layout=layout) as L:
        got = list(L)
    assert len(got) == len(ref)
    for (x, y), (ri, rl) in zip(got, ref):
        assert x.dtype == dt and tuple(x.shape) == (BS, 3, H, W)
        if layout == "channels_last":
            assert x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
        else:
            assert x.is_contiguous()
        want = reference(ri, mean, std)
        tol = 1e-5 if dt == torch.float32 else (torch.finfo(dt).eps * 2.7)  # |x| <= 2.7
        assert np.abs(x.float().numpy() - want).max() <= tol, dt
        assert np.array_equal(y.numpy(), rl)


def test_mean_std_options(ds):
    ref = plain_epoch(ds, order="seq")[0][0]
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="seq", dtype=torch.float32, mean=0, std=1) as L:
        x, _ = next(iter(L))
    assert np.allclose(x.numpy(), reference(ref, (0,) * 3, (1,) * 3), atol=1e-6)
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="seq", dtype=torch.float32, mean=(0.5, 0.25, 0.0), std=0.5) as L:
        x, _ = next(iter(L))
    assert np.allclose(x.numpy(), reference(ref, (0.5, 0.25, 0.0), (0.5,) * 3), atol=1e-5)
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="seq", dtype=torch.float32, mean=(0.5, 0.5)) as L:
        with pytest.raises(fastload.InvalidOptionError):
            next(iter(L))
    for bad in (dict(dtype=torch.int32), dict(dtype="float64"), dict(layout="nhwc"),
                dict(loader_device="yes")):
        with pytest.raises(ValueError):
            ft.Loader(ds, batch_size=BS, drop_last=True, **bad)


def test_set_epoch_matches_plain_loader(ds):
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="random", seed=3, workers=2) as L:
        for e in (2, 0, 5):
            L.set_epoch(e)
            got = [(x.numpy().copy(), y.numpy().copy()) for x, y in L]
            ref = plain_epoch(ds, epoch=e)
            assert len(got) == len(ref)
            for (gi, gl), (ri, rl) in zip(got, ref):
                assert np.array_equal(gi, ri) and np.array_equal(gl, rl)
            assert L.state_dict()["epoch"] == e + 1
        # two passes without set_epoch: consecutive epochs
        a = [y.numpy().copy() for _, y in L]
        assert np.array_equal(np.concatenate(a), np.concatenate([l for _, l in plain_epoch(ds, 6)]))


def test_state_dict_mid_epoch_resume(ds):
    kw = dict(order="random", seed=3, workers=2, augment="rrc", flip=True, size=(4, 4),
              dtype=torch.float32)
    with ft.Loader(ds, batch_size=BS, drop_last=True, **kw) as L:
        L.set_epoch(1)
        it = iter(L)
        for _ in range(2):
            next(it)
        state = L.state_dict()
        assert (state["epoch"], state["batch"]) == (1, 2)
        rest = [(x.clone(), y.clone()) for x, y in it]
    assert len(rest) == COUNT // BS - 2
    with ft.Loader(ds, batch_size=BS, drop_last=True, **kw) as L2:
        L2.load_state_dict(state)
        L2.set_epoch(1)  # the usual call before an epoch's loop keeps the resumed position
        again = list(L2)
    assert len(again) == len(rest)
    for (a, b), (c, d) in zip(rest, again):
        assert torch.equal(a, c) and torch.equal(b, d)


def test_rank_world_from_env(ds, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="seq") as L:
        assert (L.rank, L.world) == (1, 2)
        got = np.concatenate([y.numpy() for _, y in L])
    with fastload.Loader(ds, batch_size=BS, order="seq", rank=1, world=2, drop_last=True) as P:
        want = np.concatenate([l.copy() for _, l in P])
    assert np.array_equal(got, want)
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="seq", rank=0, world=1) as L:  # arguments win
        assert (L.rank, L.world) == (0, 1)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert ft.rank_world() == (0, 1)


def test_rank_world_from_torch_distributed(ds, tmp_path):
    # a subprocess: init_process_group is process-wide
    code = textwrap.dedent(f"""
        import os, torch.distributed as d, fastload.torch as ft
        os.environ["RANK"], os.environ["WORLD_SIZE"] = "3", "8"   # distributed wins over these
        d.init_process_group("gloo", init_method="file://{tmp_path}/pg", rank=0, world_size=1)
        with ft.Loader({ds!r}, batch_size={BS}, drop_last=True, order="seq") as L:
            assert (L.rank, L.world) == (0, 1), (L.rank, L.world)
            assert len(list(L)) == {COUNT // BS}
        d.destroy_process_group()
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ))
    if r.returncode != 0 and "gloo" in r.stderr.lower() and "not" in r.stderr.lower():
        pytest.skip("torch.distributed gloo not available: " + r.stderr[-300:])
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


def test_tensors_valid_after_close(ds):
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="seq", workers=2) as L:
        it = iter(L)
        x8, y8 = next(it)
        want = x8.clone()
    with ft.Loader(ds, batch_size=BS, drop_last=True, order="seq", workers=2, dtype=torch.float32) as L:
        xf, _ = next(iter(L))
        wantf = xf.clone()
    for _ in range(3):
        junk = [np.ones(1 << 20, np.uint8) for _ in range(8)]  # reuse of freed memory
    del junk
    assert torch.equal(x8, want) and torch.equal(xf, wantf)
    x8[:] = 0  # still memory of its own


def test_errors_pass_through(datasets, tmp_path):
    _, ds, bad, shard = datasets
    with pytest.raises(fastload.DataIOError) as e:
        ft.Loader(str(tmp_path / "missing"), batch_size=BS)
    assert isinstance(e.value, OSError)
    with pytest.raises(fastload.InvalidOptionError):
        ft.Loader(ds, batch_size=BS, drop_last=True, rank=2, world=2)
    with pytest.raises(fastload.CorruptRecordError) as e:
        with ft.Loader(bad, batch_size=BS, order="seq", workers=1) as L:
            for _ in L:
                pass
    assert shard in str(e.value)
    L = ft.Loader(ds, batch_size=BS)
    L.close()
    with pytest.raises(fastload.LoaderClosedError):
        next(iter(L))


def test_old_torch_batches_wrapper(ds):
    ref = plain_epoch(ds, order="seq")
    with fastload.Loader(ds, batch_size=BS, order="seq", drop_last=True) as L:
        with pytest.warns(DeprecationWarning):
            got = list(fastload.torch_batches(L, mean=(0.5,) * 3, std=(0.25,) * 3))
    assert len(got) == len(ref)
    for (x, y), (ri, rl) in zip(got, ref):
        assert np.allclose(x.numpy(), reference(ri, (0.5,) * 3, (0.25,) * 3), atol=1e-5)
        assert np.array_equal(y.numpy(), rl)


class _Fake:
    """Stand-ins for torch.cuda streams and events that log what the feeder asks of them."""

    def __init__(self):
        self.log = []
        self.events = []
        fake = self

        class Stream:
            def __init__(self, device=None, name="side"):
                self.name = name

            def wait_event(self, ev):
                fake.log.append(("wait_event", self.name, ev.on))

            def wait_stream(self, other):
                fake.log.append(("wait_stream", self.name, other.name))

        class Event:
            def __init__(self):
                self.done, self.on = False, None
                fake.events.append(self)

            def record(self, stream):
                self.on = stream.name
                fake.log.append(("record", stream.name))

            def query(self):
                return self.done

            def synchronize(self):
                self.done = True

        self.Stream, self.Event = Stream, Event
        self.current = Stream(name="current")


def _host_as_tensor(obj, device=None):
    """torch.as_tensor of a _CudaArray whose 'device' pointer is host memory (the fake)."""
    i = obj.__cuda_array_interface__
    n = int(np.prod(i["shape"]))
    ct = {"|u1": ctypes.c_uint8, "<i4": ctypes.c_int32}[i["typestr"]]
    a = np.ctypeslib.as_array((ct * n).from_address(i["data"][0])).reshape(i["shape"])
    return torch.from_numpy(a)


class _DevBatch:
    """A Batch as the library's device mode gives it, its 'device' buffers being host memory."""

    def __init__(self, b):
        self.b, self.images, self.labels = b, b.images, b.labels
        self.device_images, self.device_labels = b.images.ctypes.data, b.labels.ctypes.data
        self.stream, self.last_in_epoch = 1234, b.last_in_epoch


@pytest.mark.parametrize("loader_device", [False, True])
def test_cuda_paths_fake_streams(ds, monkeypatch, loader_device):
    fake = _Fake()
    monkeypatch.setattr(torch.cuda, "Stream", fake.Stream)
    monkeypatch.setattr(torch.cuda, "Event", fake.Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: fake.current)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "ExternalStream",
                        lambda ptr, device=None: fake.Stream(name=f"loader{ptr}"))
    monkeypatch.setattr(torch.Tensor, "record_stream",
                        lambda self, s: fake.log.append(("record_stream", s.name)))
    monkeypatch.setattr(torch, "as_tensor", _host_as_tensor)
    feed = ft._Feeder("cpu", torch.float32, "nchw", None, None, loader_device=loader_device)
    feed.cuda, feed.side = True, fake.Stream(name="side")  # the CUDA branch, on the CPU
    ref = plain_epoch(ds, order="seq")
    # workers=1: a ring of 3 slots; make_room keeps one free, so no batch comes as a copy
    with fastload.Loader(ds, batch_size=BS, order="seq", workers=1, drop_last=True, prefetch=3) as L:
        ring = L._ring
        assert ring.nslots == 3
        for k in range(4):
            feed.make_room()
            b = L.next_batch()
            assert not b.copied
            x, y = feed(_DevBatch(b) if loader_device else b)
            del b
            gc.collect()
            want = reference(ref[k][0], ft.IMAGENET_MEAN, ft.IMAGENET_STD)
            assert np.abs(x.numpy() - want).max() <= 1e-5 and np.array_equal(y.numpy(), ref[k][1])
            assert y.dtype == torch.int64
            # no event completed: the batches stay held, two at most (the oldest waited for)
            assert len(feed.pending) == min(k + 1, 2) and ring.live == len(feed.pending)
            assert all(ev.done for ev in fake.events[:-2]) and not fake.events[-1].done
            assert not any(ev.done for ev in fake.events[-2:])
        if loader_device:  # wait for the loader's stream, event after the conversion's reads
            assert fake.log[:2] == [("wait_stream", "current", "loader1234"), ("record", "current")]
        else:  # copy on the side stream, event there, current waits, tensors marked for current
            assert fake.log[:4] == [("record", "side"), ("wait_event", "current", "side"),
                                    ("record_stream", "current"), ("record_stream", "current")]
        fake.events[-2].done = True  # a finished event frees its batch at the next call
        feed.make_room()
        feed(L.next_batch())
        assert len(feed.pending) == 2 and fake.events[-2].on is not None
        feed.close()
        gc.collect()
        assert feed.pending == [] and ring.live == 0


def test_workers_passthrough(ds):
    """workers / active_workers / set_workers as fastload.Loader's: same batches mid-epoch,
    the same errors."""
    kw = dict(batch_size=BS, order="random", seed=5, workers=3, augment="rrc", flip=True, size=(4, 4))
    with ft.Loader(ds, **kw) as L:
        want = [(x.numpy().copy(), y.numpy().copy()) for x, y in L]
    with ft.Loader(ds, **kw) as L:
        assert L.workers == 3 and L.active_workers == 3
        got = []
        for i, (x, y) in enumerate(L):
            got.append((x.numpy().copy(), y.numpy().copy()))
            L.set_workers(1 + i % 3)
            assert L.active_workers == 1 + i % 3 and L.loader.active_workers == 1 + i % 3
        assert len(got) == len(want) == len(L)
        for (gx, gy), (wx, wy) in zip(got, want):
            assert np.array_equal(gx, wx) and np.array_equal(gy, wy)
        L.active_workers = 2
        assert L.active_workers == 2
        for bad in (0, 4, -3):
            with pytest.raises(fastload.InvalidOptionError,
                               match=f"^{bad} decode workers asked for: the loader has 3$"):
                L.set_workers(bad)
        with pytest.raises(ValueError):
            L.active_workers = 2.0
        assert L.active_workers == 2
    with pytest.raises(fastload.LoaderClosedError):
        L.set_workers(1)


@pytest.mark.parametrize("kw", [dict(), dict(drop_last=True), dict(batch_size=7, rank=2, world=3),
                                dict(batch_size=10, world=2, rank=1, drop_last=True)])
def test_len_matches_iteration(ds, kw):
    kw = dict(dict(batch_size=BS, workers=2), **kw)
    with ft.Loader(ds, **kw) as L:
        for e in range(2):
            n = sum(1 for _ in L)
            assert n == len(L), (e, n, len(L))
