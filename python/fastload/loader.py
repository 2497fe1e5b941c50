"""loader.py — fastload.Loader: batches from libfastload as numpy arrays without copies.

The images of a batch are a numpy array (N, H, W, C) uint8 over the loader's pinned batch memory
and the labels an int32 array; nothing is copied. Every array handed out keeps its ring slot: the
slot goes back to the loader only when the last array over it (or a view of it) is garbage, so a
batch is never overwritten while referenced, and `list(L.epoch())` is correct. When the batches
the caller holds would leave the ring no free slot, the next batch is copied out of the ring into
memory of its own (so memory is bounded by what the caller holds). After `close()` the ring lives
on until the last held array dies. One consumer thread per loader; see Loader.
"""
import ctypes
import logging
import operator
import os
import threading

import numpy as np

from . import _native
from ._native import fl_error, fl_batch
from .errors import (CorruptRecordError, DataIOError, Error, InvalidOptionError,  # noqa: F401
                     LoaderClosedError, UnsupportedError, make_error)

_log = logging.getLogger("fastload")
_MAX_EPOCH = 1 << 40  # far beyond any run; keeps epoch * batches_per_epoch inside 64 bits


def _raise(code, err):
    msg = err.msg.decode("utf-8", "replace") if err.msg else ""
    if not msg:
        msg = _native.lib().fl_strerror(code).decode("utf-8", "replace")
    raise make_error(code, msg)


class _Ring:
    """Owns the C loader handle and counts the ring slots held by live arrays. Holds no reference
    to the Loader, so arrays outliving it keep only this (and the ring memory) alive."""

    def __init__(self, lib, handle, nslots):
        self.lib = lib
        self.handle = handle
        self.nslots = nslots
        self.live = 0             # slots held by live arrays
        self.pending = []         # slots dropped on another thread: released by the consumer
        self.consumer = None      # threading.Thread driving next(), set by the first request
        self.in_next = False      # the consumer is inside fl_loader_next
        self.closing = False      # close() was called with slots still held
        self.lock = threading.RLock()

    def drop(self, ptr):
        """A slot's last array died (any thread): give the slot back, now or via `pending`."""
        with self.lock:
            if self.handle is None:
                return
            if self.closing:
                self.lib.fl_loader_release(self.handle, ptr)
                self.live -= 1
                if self.live == 0:
                    self.lib.fl_loader_close(self.handle)
                    self.handle = None
                return
            c = self.consumer
            if not self.in_next and (c is None or c.ident == threading.get_ident()):
                self.lib.fl_loader_release(self.handle, ptr)
                self.live -= 1
            else:
                self.pending.append(ptr)

    def drain(self):
        """Release the slots dropped on other threads (consumer thread only)."""
        with self.lock:
            while self.pending:
                self.lib.fl_loader_release(self.handle, self.pending.pop())
                self.live -= 1

    def close(self):
        """Close the handle now, or when the last held slot dies."""
        with self.lock:
            if self.handle is None or self.closing:
                return
            while self.pending:
                self.lib.fl_loader_release(self.handle, self.pending.pop())
                self.live -= 1
            if self.live == 0:
                self.lib.fl_loader_close(self.handle)
                self.handle = None
            else:
                self.closing = True


class _Slot:
    """One ring slot held by the arrays over it: released when the last of them is garbage."""
    __slots__ = ("ring", "ptr", "__weakref__")

    def __init__(self, ring):
        self.ring = ring
        self.ptr = None

    def __del__(self):
        if self.ptr is not None:
            try:
                self.ring.drop(self.ptr)
            except Exception:  # interpreter shutdown
                pass


def _array(slot, ptr, shape, ctype, dtype):
    """A numpy array of `shape` over the C memory at `ptr`, without copying: its base is a ctypes
    array over that memory that holds `slot` (so the slot lives as long as any view of it)."""
    count = 1
    for d in shape:
        count *= d
    if not ptr or count == 0:
        return np.empty(shape, dtype=dtype)
    buf = (ctype * count).from_address(ctypes.addressof(ptr.contents))
    buf.slot = slot
    a = np.frombuffer(buf, dtype=dtype)
    return a.reshape(shape) if len(shape) > 1 else a


class Batch(tuple):
    """One batch: unpacks as (images, labels). Attributes: images (N,H,W,C uint8), labels
    (N int32), indices (N uint64 dataset record indices), epoch, batch (number within the epoch),
    last_in_epoch, skipped (corrupt records replaced), address (the images pointer), copied
    (True when the batch was copied out of the ring because the caller held every other slot).
    The arrays keep the batch's ring slot until the last of them (and of their views) is garbage;
    release() only drops this object's own claim (kept for compatibility)."""

    def __new__(cls, images, labels, indices, b, copied):
        self = super().__new__(cls, (images, labels))
        self.images, self.labels, self.indices = images, labels, indices
        self.epoch, self.batch = int(b.epoch), int(b.batch)
        self.last_in_epoch = bool(b.last_in_epoch)
        self.skipped = int(b.skipped)
        self.address = images.ctypes.data if images.size else 0
        self.copied = copied
        if copied:  # the device copies belong to the ring slot, which went back
            self.device_images = self.device_labels = self.event = self.stream = None
        else:
            self.device_images, self.device_labels = b.device_images, b.device_labels
            self.event, self.stream = b.event, b.stream
        self._released = False
        return self

    @property
    def released(self):
        return self._released

    def release(self):
        """Say the batch is no longer needed. Its slot goes back to the ring when its arrays (and
        their views) are garbage: nothing held is ever overwritten."""
        self._released = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __repr__(self):
        return (f"fastload.Batch(epoch={self.epoch}, batch={self.batch}, size={len(self.labels)}, "
                f"shape={self.images.shape}{', copied' if self.copied else ''})")


def _parse_augment(augment, flip):
    base, f = "none", bool(flip)
    for tok in str(augment or "none").replace("+", ",").split(","):
        tok = tok.strip()
        if tok == "flip":
            f = True
        elif tok in _native.AUGMENT:
            base = tok
        elif tok:
            raise InvalidOptionError(FL_E_INVALID, f"fastload: augment '{augment}': use rrc, center "
                                     "or none, optionally ',flip'")
    return _native.AUGMENT[base], f


FL_E_INVALID = -40009


def _choice(name, value, table):
    if value not in table:
        raise InvalidOptionError(FL_E_INVALID, f"fastload: {name}={value!r}: expected one of "
                                 f"{sorted(set(table))}")
    return table[value]


def _count(name, value, hi=None):
    """`value` as a non-negative int (below `hi`), else InvalidOptionError (a ValueError)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        v = operator.index(value)
    except TypeError:
        raise InvalidOptionError(FL_E_INVALID, f"fastload: {name}={value!r}: expected an integer") \
            from None
    if v < 0 or (hi is not None and v >= hi):
        rng = f"[0, {hi})" if hi is not None else ">= 0"
        raise InvalidOptionError(FL_E_INVALID, f"fastload: {name}={v} out of range {rng}")
    return v


def _default_log(user, level, msg):
    (_log.warning if level else _log.info)(msg.decode("utf-8", "replace") if msg else "")


class Loader:
    """Stream a packed dataset (made by packdata) as batches of numpy arrays.

    Loader(path, batch_size=256, workers=0, size=None, augment="none", flip=False,
           order="random", seed=0, rank=0, world=1, io="auto", direct=False, drop_last=False, ...)

    path        dataset directory (shards or LMDB backend)
    batch_size  samples per batch
    workers     decode threads (0: one per online CPU)
    size        output (height, width), or an int for square; None: the dataset's fixed size
    augment     "rrc" (random-resized-crop), "center" (resize + center crop), "none";
                "rrc,flip" also turns on flip
    flip        random horizontal flip (p = 0.5)
    scale, ratio  random-resized-crop ranges (defaults (0.08, 1.0), (3/4, 4/3))
    order       "seq", "random" (a permutation per epoch) or "quasi" (block shuffle)
    seed        fixes shuffling and augmentation: same seed, same batches
    rank, world this process's share of every epoch in a data-parallel job
    drop_last   drop the incomplete tail; False pads by wrapping around (equal batch counts per rank)
    io          "auto", "uring", "pread", "mmap" or "memory";  direct: O_DIRECT reads
    memory_max  io="auto" reads raw-pixel datasets up to this many bytes into memory
                (0: 256 MiB and 1/16 of RAM; negative: never)
    decode      "accurate" (libjpeg's defaults) or "fast" (fast IDCT, box chroma upsampling)
    prefetch    batches in the ring (0: workers + 2);  on_corrupt: "error" or "skip"
    device      -1: host only; >= 0 the library also copies each batch to that CUDA device
    start_epoch, start_batch  resume position (see state_dict)

    Iterating over a Loader yields the batches left in the current epoch as (images, labels)
    tuples (fastload.Batch), like a DataLoader; `epoch()` does the same; `batches(n)` streams
    across epochs. A batch's ring slot goes back when its arrays are garbage (see Batch); while
    the caller holds all ring slots but one, batches come as copies (Batch.copied).
    One consumer thread: the thread that first asks for a batch drives the loader; another thread
    asking gets a RuntimeError (position(), state_dict(), stats() may be read from any thread).
    A KeyboardInterrupt inside iteration loses no batch: the batch it interrupted comes next.
    Errors raise fastload.Error subclasses (see fastload.errors) with the library's message:
    CorruptRecordError, DataIOError (an OSError), InvalidOptionError and LoaderClosedError
    (ValueErrors), UnsupportedError.
    """

    def __init__(self, path, batch_size=256, workers=0, size=None, augment="none", flip=False,
                 order="random", seed=0, rank=0, world=1, io="auto", direct=False, drop_last=False,
                 prefetch=0, channels=0, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 center_ratio=0.875, on_corrupt="error", pinned=True, device=-1, queue_depth=0,
                 quasi_block=0, quasi_window=0, start_epoch=0, start_batch=0, log=None,
                 decode="accurate", memory_max=0):
        self._lib = _native.lib()
        self.path = os.fspath(path)
        aug, fl = _parse_augment(augment, flip)
        if size is None:
            h = w = 0
        elif isinstance(size, int):
            h = w = size
        else:
            h, w = (int(v) for v in size)
        if _count("batch_size", batch_size) < 1:
            raise InvalidOptionError(FL_E_INVALID, f"fastload: batch_size must be at least 1 (got {batch_size})")
        if _count("world", world) < 1 or _count("rank", rank) >= world:
            raise InvalidOptionError(FL_E_INVALID, f"fastload: rank {rank} must be in [0, world={world})")
        start_epoch = _count("start_epoch", start_epoch, _MAX_EPOCH)
        start_batch = _count("start_batch", start_batch)
        po = _native.PaddedOptions()
        self._lib.fl_loader_options_init(ctypes.byref(po))
        o = po.s
        o.batch_size = int(batch_size)
        o.workers = int(workers)
        if prefetch:
            o.prefetch = int(prefetch)
        o.out_height, o.out_width = h, w
        if channels:
            o.channels = int(channels)
        o.augment, o.flip = aug, int(fl)
        o.scale_min, o.scale_max = (float(v) for v in scale)
        o.ratio_min, o.ratio_max = (float(v) for v in ratio)
        o.center_ratio = float(center_ratio)
        o.order = _choice("order", order, _native.ORDER)
        if quasi_block:
            o.quasi_block = int(quasi_block)
        if quasi_window:
            o.quasi_window = int(quasi_window)
        o.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        o.rank, o.world = int(rank), int(world)
        o.drop_last = int(bool(drop_last))
        o.io = _choice("io", io, _native.IO)
        o.direct = int(bool(direct))
        if queue_depth:
            o.queue_depth = int(queue_depth)
        o.on_corrupt = _choice("on_corrupt", on_corrupt, _native.ON_CORRUPT)
        o.pinned = int(bool(pinned))
        o.device = int(device)
        o.decode_flags = _choice("decode", decode, _native.DECODE)
        o.memory_max = int(memory_max)
        # the callback object must outlive the loader: keep it on self
        self._log_cb = _native.LOG_FN(
            (lambda u, lv, m: log(lv, m.decode("utf-8", "replace"))) if log else _default_log)
        o.log = self._log_cb
        self._opts = po
        self.seed = int(seed)
        self._prefetch = int(prefetch)
        self._workers = int(workers)
        self._handle = None
        self._ring = None
        self._current = None      # the batch iteration handed out last
        self._open(start_epoch, start_batch)

    # ---- life cycle -------------------------------------------------------------------------
    def _open(self, epoch, batch):
        self._opts.s.start_epoch, self._opts.s.start_batch = epoch, batch
        h = ctypes.c_void_p()
        err = fl_error()
        rc = self._lib.fl_loader_create(os.fsencode(self.path), ctypes.byref(self._opts), ctypes.byref(h),
                                        ctypes.byref(err))
        if rc:
            if not self._opts.s.out_height and b"vary in size" in err.msg:
                # The library names its C option fields; say which argument sets them here.
                raise make_error(rc, err.msg.decode("utf-8", "replace") + " (pass size=(H, W) or size=S)")
            _raise(rc, err)
        bpe = int(self._lib.fl_loader_batches_per_epoch(h))
        if batch >= bpe:
            self._lib.fl_loader_close(h)
            raise InvalidOptionError(FL_E_INVALID, f"fastload: start batch {batch} out of range: "
                                     f"an epoch has {bpe} batches")
        # ring slots as the library sizes them (loader.c size_pipeline): prefetch or workers + 2
        workers = self._workers or os.sysconf("SC_NPROCESSORS_ONLN") or 1
        self._ring = _Ring(self._lib, h, self._prefetch or workers + 2)
        self._handle = h
        self._bpe = bpe
        self._failed = False
        # the out-pointer fl_loader_next fills: non-NULL while a batch taken from the ring has not
        # reached the caller (a KeyboardInterrupt right after the C call); delivered next time
        self._out = ctypes.POINTER(fl_batch)()
        self._undelivered = None  # (epoch, batch) of a batch taken from C, not yet delivered

    def close(self):
        """Stop handing out batches. Arrays still held keep their memory: the ring (and the
        workers) are freed when the last of them is garbage, at once when none is held."""
        if self._handle is not None:
            r = self._ring
            if r.in_next and r.consumer is not None and r.consumer.ident != threading.get_ident():
                raise RuntimeError("fastload: close() from another thread while the consumer "
                                   "thread waits for a batch")
            self._current = None
            self._handle = None
            self._ring = None
            r.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _closed(self):
        return LoaderClosedError(-22, f"{self.path}: loader is closed")

    def _check_handle(self):
        if self._handle is None:
            raise self._closed()

    def _check_open(self):
        if self._handle is None:
            raise self._closed()
        if self._failed:
            raise LoaderClosedError(-22, f"{self.path}: loader failed earlier; create a new one")

    # ---- batches ----------------------------------------------------------------------------
    def next_batch(self):
        """The next batch in order (see Batch: its arrays keep its slot while they live)."""
        self._check_open()
        r = self._ring
        me = threading.current_thread()
        c = r.consumer
        if c is not me:
            if c is not None and c.is_alive():
                raise RuntimeError(f"fastload: this Loader is consumed by thread {c.name!r}; a "
                                   "Loader has one consumer thread (create one Loader per thread)")
            r.consumer = me
        if r.pending:
            r.drain()
        out = self._out
        if not out:  # else: the batch an interrupted call took, not delivered yet
            err = fl_error()
            r.in_next = True
            try:
                rc = self._lib.fl_loader_next(self._handle, ctypes.byref(out), ctypes.byref(err))
            finally:
                r.in_next = False
            if rc:
                self._failed = True
                _raise(rc, err)
        b = out.contents
        n, h, w, ch = b.size, b.height, b.width, b.channels
        if r.live + 1 < r.nslots:  # zero-copy: the arrays hold the slot
            slot = _Slot(r)
            images = _array(slot, b.images, (n, h, w, ch), ctypes.c_uint8, np.uint8)
            labels = _array(slot, b.labels, (n,), ctypes.c_int32, np.int32)
            indices = _array(slot, b.indices, (n,), ctypes.c_uint64, np.uint64)
            batch = Batch(images, labels, indices, b, False)
            r.live += 1
            slot.ptr = out            # armed: the slot releases when its arrays die
            self._out = ctypes.POINTER(fl_batch)()
        else:  # the caller holds every other slot: copy, and give the slot back now
            tmp = _Slot(r)
            images = _array(tmp, b.images, (n, h, w, ch), ctypes.c_uint8, np.uint8).copy()
            labels = _array(tmp, b.labels, (n,), ctypes.c_int32, np.int32).copy()
            indices = _array(tmp, b.indices, (n,), ctypes.c_uint64, np.uint64).copy()
            batch = Batch(images, labels, indices, b, True)
            self._out = ctypes.POINTER(fl_batch)()
            self._lib.fl_loader_release(self._handle, out)
        return batch

    def release(self):
        """Drop the loader's reference to the batch iteration handed out last."""
        self._current = None

    def epoch(self):
        """Iterate over the batches left in the current epoch (all of them at an epoch start)."""
        self._check_open()
        e, _ = self.position()
        while self.position()[0] == e:
            self._current = None
            b = self._current = self.next_batch()
            last = b.last_in_epoch
            yield b
            del b
            if last:
                break
        self._current = None

    __iter__ = epoch

    def batches(self, n=None):
        """Stream batches across epoch boundaries: n of them, or without end when n is None."""
        i = 0
        while n is None or i < n:
            self._current = None
            self._current = self.next_batch()
            yield self._current
            i += 1
        self._current = None

    def __len__(self):
        self._check_handle()
        return self._bpe

    # ---- position / resume ------------------------------------------------------------------
    def position(self):
        """(epoch, batch) of the next batch the loader will hand out."""
        self._check_open()
        out = self._out
        if out:  # taken from the ring by an interrupted call: it is the next one
            return int(out.contents.epoch), int(out.contents.batch)
        e, b = ctypes.c_uint64(), ctypes.c_uint64()
        self._lib.fl_loader_position(self._handle, ctypes.byref(e), ctypes.byref(b))
        return int(e.value), int(b.value)

    def state_dict(self):
        """Where the stream stands: {'epoch', 'batch', 'seed'}. A loader given this state (same
        dataset and options) continues with exactly the batches this one would produce next."""
        e, b = self.position()
        return {"epoch": e, "batch": b, "seed": self.seed}

    def load_state_dict(self, state):
        """Restart at state['epoch'], state['batch'] (from state_dict()). Arrays still held keep
        their memory. Raises ValueError (InvalidOptionError), leaving the loader unchanged, for a
        state that is not a mapping with integer 'epoch' and 'batch' in range, or that was saved
        with another seed."""
        self._check_handle()
        try:
            keys = sorted(state)
            if "epoch" not in state or "batch" not in state:
                raise KeyError
        except Exception:
            raise InvalidOptionError(FL_E_INVALID, "fastload: state needs 'epoch' and 'batch' (as "
                                     f"state_dict() returns), got {state!r}") from None
        if "seed" in state:
            try:
                seed = operator.index(state["seed"])
            except TypeError:
                raise InvalidOptionError(FL_E_INVALID, f"fastload: state seed {state['seed']!r}: "
                                         "expected an integer") from None
            if seed != self.seed:
                raise InvalidOptionError(FL_E_INVALID, f"fastload: state was saved with seed {seed}, "
                                         f"this loader uses seed {self.seed}: the stream would not "
                                         "continue exactly")
        e = _count("state epoch", state["epoch"], _MAX_EPOCH)
        b = _count("state batch", state["batch"], self._bpe)
        del keys
        self.close()
        self._open(e, b)

    # ---- information ------------------------------------------------------------------------
    @property
    def batches_per_epoch(self):
        return len(self)

    @property
    def samples_per_epoch(self):
        self._check_handle()
        return int(self._lib.fl_loader_samples_per_epoch(self._handle))

    @property
    def batch_size(self):
        return int(self._opts.s.batch_size)

    @property
    def dataset_size(self):
        self._check_handle()
        return int(self._lib.fl_dataset_count(self._lib.fl_loader_dataset(self._handle)))

    @property
    def class_names(self):
        self._check_handle()
        ds = self._lib.fl_loader_dataset(self._handle)
        try:
            n = self._lib.fl_dataset_num_classes(ds)
            return [(self._lib.fl_dataset_class_name(ds, i) or b"").decode("utf-8", "replace")
                    for i in range(n)]
        except AttributeError:
            return []

    @property
    def io(self):
        """How records are read, decided when the loader opened, in words: backend, O_DIRECT or
        buffered, and why `io="auto"` chose O_DIRECT (e.g. "io_uring, O_DIRECT (io auto: the
        data set (1100.0 MiB) is larger than the page cache it can expect (256.0 MiB, cgroup
        memory limit))")."""
        self._check_handle()
        if not hasattr(self._lib, "fl_loader_io_describe"):
            return ""
        return (self._lib.fl_loader_io_describe(self._handle) or b"").decode("utf-8", "replace")

    @property
    def direct(self):
        """True when records are read with O_DIRECT (asked for, or chosen by io="auto")."""
        self._check_handle()
        return bool(hasattr(self._lib, "fl_loader_direct") and self._lib.fl_loader_direct(self._handle))

    def stats(self):
        """Loader counters: images, batches, bytes_read, skipped, time per stage (seconds summed
        over workers), wall_s, io_backend, io (how records are read, as `io`), pinned_bytes."""
        self._check_open()
        ps = _native.PaddedStats()
        self._lib.fl_loader_stats_get(self._handle, ctypes.byref(ps))
        s = ps.s
        d = {name: getattr(s, name) for name, _ in s._fields_}
        d["io_backend"] = (s.io_backend or b"").decode()
        d["io"] = self.io
        return d

    def __repr__(self):
        state = "closed" if self._handle is None else "epoch %d batch %d" % self.position()
        return f"fastload.Loader({self.path!r}, batch_size={self.batch_size}, {state})"
