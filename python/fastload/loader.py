"""loader.py — fastload.Loader: batches from libfastload as numpy arrays without copies.

The images of a batch are a numpy view (N, H, W, C) uint8 of the loader's pinned batch memory and
the labels an int32 view; nothing is copied. A batch's memory goes back to the loader's ring when
the next batch is requested through iteration, when `release()` is called, or at the end of a
`with` block. Keep a batch longer by copying it (`images.copy()`).
"""
import ctypes
import logging
import os

import numpy as np

from . import _native
from ._native import fl_error, fl_batch

_log = logging.getLogger("fastload")


class Error(Exception):
    """A libfastload error. `code` is the library's code (negative errno or FL_E_*), `message`
    its one-line message naming the shard, record and reason."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def _raise(code, err):
    msg = err.msg.decode("utf-8", "replace") if err.msg else ""
    if not msg:
        msg = _native.lib().fl_strerror(code).decode("utf-8", "replace")
    raise Error(code, msg)


def _view(ptr, ctype, count, dtype):
    """A numpy array over `count` elements at C pointer `ptr`, without copying."""
    if count == 0:
        return np.empty(0, dtype=dtype)
    buf = (ctype * count).from_address(ctypes.addressof(ptr.contents))
    return np.frombuffer(buf, dtype=dtype, count=count)


class Batch(tuple):
    """One batch: unpacks as (images, labels). Attributes: images (N,H,W,C uint8 view), labels
    (N int32 view), indices (N uint64 dataset record indices), epoch, batch (number within the
    epoch), last_in_epoch, skipped (corrupt records replaced), address (the C images pointer).
    Valid until released; usable as a context manager that releases it."""

    def __new__(cls, loader, ptr):
        b = ptr.contents
        n = b.size
        shape = (n, b.height, b.width, b.channels)
        count = n * b.height * b.width * b.channels
        images = _view(b.images, ctypes.c_uint8, count, np.uint8).reshape(shape)
        labels = _view(b.labels, ctypes.c_int32, n, np.int32)
        self = super().__new__(cls, (images, labels))
        self.images, self.labels = images, labels
        self.indices = _view(b.indices, ctypes.c_uint64, n, np.uint64)
        self.epoch, self.batch = int(b.epoch), int(b.batch)
        self.last_in_epoch = bool(b.last_in_epoch)
        self.skipped = int(b.skipped)
        self.address = ctypes.addressof(b.images.contents) if count else 0
        self.device_images = b.device_images
        self.device_labels = b.device_labels
        self.event = b.event
        self.stream = b.stream
        self._loader = loader
        self._ptr = ptr
        return self

    @property
    def released(self):
        return self._ptr is None

    def release(self):
        """Give the batch's memory back to the loader (the arrays must not be used after)."""
        if self._ptr is not None and self._loader is not None:
            self._loader._release(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __repr__(self):
        return (f"fastload.Batch(epoch={self.epoch}, batch={self.batch}, size={len(self.labels)}, "
                f"shape={self.images.shape}{', released' if self.released else ''})")


def _parse_augment(augment, flip):
    base, f = "none", bool(flip)
    for tok in str(augment or "none").replace("+", ",").split(","):
        tok = tok.strip()
        if tok == "flip":
            f = True
        elif tok in _native.AUGMENT:
            base = tok
        elif tok:
            raise ValueError(f"fastload: augment '{augment}': use rrc, center or none, optionally ',flip'")
    return _native.AUGMENT[base], f


def _choice(name, value, table):
    if value not in table:
        raise ValueError(f"fastload: {name}={value!r}: expected one of {sorted(set(table))}")
    return table[value]


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
    across epochs. In iteration, each batch is released when the next one is requested.
    Errors raise fastload.Error with the library's message.
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
        if int(batch_size) < 1:
            raise ValueError(f"fastload: batch_size must be at least 1 (got {batch_size})")
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"fastload: rank {rank} must be in [0, world={world})")
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
        self._handle = None
        self._current = None      # batch handed out by iteration (released on the next request)
        self._held = {}           # id -> Batch for every batch not yet released
        self._open(int(start_epoch), int(start_batch))

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
                raise Error(rc, err.msg.decode("utf-8", "replace") + " (pass size=(H, W) or size=S)")
            _raise(rc, err)
        self._handle = h
        self._failed = False

    def close(self):
        """Stop the workers and free the ring. Arrays of unreleased batches become invalid."""
        if self._handle is not None:
            for b in list(self._held.values()):
                b._ptr = None
                b._loader = None
            self._held.clear()
            self._current = None
            self._lib.fl_loader_close(self._handle)
            self._handle = None

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

    def _check_handle(self):
        if self._handle is None:
            raise Error(-22, f"{self.path}: loader is closed")

    def _check_open(self):
        if self._handle is None:
            raise Error(-22, f"{self.path}: loader is closed")
        if self._failed:
            raise Error(-22, f"{self.path}: loader failed earlier; create a new one")

    # ---- batches ----------------------------------------------------------------------------
    def next_batch(self):
        """The next batch in order. It stays valid until you call its release() (or close the
        loader): hold at most `prefetch` - 1 at once, or the loader stalls."""
        self._check_open()
        p = ctypes.POINTER(fl_batch)()
        err = fl_error()
        rc = self._lib.fl_loader_next(self._handle, ctypes.byref(p), ctypes.byref(err))
        if rc:
            self._failed = True
            _raise(rc, err)
        b = Batch(self, p)
        self._held[id(b)] = b
        return b

    def _release(self, b):
        if b._ptr is None:
            return
        if self._handle is not None:
            self._lib.fl_loader_release(self._handle, b._ptr)
        self._held.pop(id(b), None)
        b._ptr = None
        if self._current is b:
            self._current = None

    def release(self):
        """Release the batch most recently handed out by iteration (if still held)."""
        if self._current is not None:
            self._current.release()

    def _next_auto(self):
        if self._current is not None:
            self._current.release()
        b = self.next_batch()
        self._current = b
        return b

    def epoch(self):
        """Iterate over the batches left in the current epoch (all of them at an epoch start)."""
        self._check_open()
        e, _ = self.position()
        while True:
            if self.position()[0] != e:
                return
            b = self._next_auto()
            yield b
            if b.last_in_epoch:
                # release eagerly: nothing will request another batch for this epoch
                self.release()
                return

    __iter__ = epoch

    def batches(self, n=None):
        """Stream batches across epoch boundaries: n of them, or without end when n is None."""
        i = 0
        while n is None or i < n:
            yield self._next_auto()
            i += 1
        self.release()

    def __len__(self):
        self._check_handle()
        return int(self._lib.fl_loader_batches_per_epoch(self._handle))

    # ---- position / resume ------------------------------------------------------------------
    def position(self):
        """(epoch, batch) of the next batch the loader will return."""
        self._check_open()
        e, b = ctypes.c_uint64(), ctypes.c_uint64()
        self._lib.fl_loader_position(self._handle, ctypes.byref(e), ctypes.byref(b))
        return int(e.value), int(b.value)

    def state_dict(self):
        """Where the stream stands: {'epoch', 'batch', 'seed'}. A loader given this state (same
        dataset and options) continues with exactly the batches this one would produce next."""
        e, b = self.position()
        return {"epoch": e, "batch": b, "seed": self.seed}

    def load_state_dict(self, state):
        """Restart at state['epoch'], state['batch'] (from state_dict()). Batches still held
        become invalid. Raises ValueError when the state was saved with another seed."""
        if "seed" in state and int(state["seed"]) != self.seed:
            raise ValueError(f"fastload: state was saved with seed {state['seed']}, this loader "
                             f"uses seed {self.seed}: the stream would not continue exactly")
        if "epoch" not in state or "batch" not in state:
            raise ValueError("fastload: state needs 'epoch' and 'batch' (as state_dict() returns), "
                             f"got keys {sorted(state)}")
        self.close()
        self._open(int(state["epoch"]), int(state["batch"]))

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

    def stats(self):
        """Loader counters: images, batches, bytes_read, skipped, time per stage (seconds summed
        over workers), wall_s, io_backend, pinned_bytes."""
        self._check_open()
        ps = _native.PaddedStats()
        self._lib.fl_loader_stats_get(self._handle, ctypes.byref(ps))
        s = ps.s
        d = {name: getattr(s, name) for name, _ in s._fields_}
        d["io_backend"] = (s.io_backend or b"").decode()
        return d

    def __repr__(self):
        state = "closed" if self._handle is None else "epoch %d batch %d" % self.position()
        return f"fastload.Loader({self.path!r}, batch_size={self.batch_size}, {state})"
