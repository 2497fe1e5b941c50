"""loader.py — fastload.Loader: batches from libfastload as numpy arrays without copies.

The images of a batch are a numpy array (N, H, W, C) uint8 over the loader's pinned batch memory
and the labels an int32 array; nothing is copied. Every array handed out keeps its ring slot: the
slot goes back to the loader once the last array over it (or a view of it) is garbage, so a
batch is never overwritten while referenced, and `list(L.epoch())` is correct. When the batches
the caller holds would leave the ring no free slot, the next batch is copied out of the ring into
memory of its own (so memory is bounded by what the caller holds). After `close()` the ring lives
on until the last held array dies. One consumer thread per loader; one process (see fork below).

Interrupts: a KeyboardInterrupt is raised by CPython only at calls and loop jumps, never between
two attribute or item stores. Every step that takes a batch from the library or hands one out
therefore ends in a "commit" of plain stores followed by the return, and every other step can be
repeated: a batch taken but not handed out is handed out next time, a slot given back twice is
ignored by the library. No Python code runs when an array dies (a weakref calls list.append, a C
function): the consumer gives dead slots back at its next call, so a Ctrl-C can neither be
swallowed by a finalizer nor leave a slot half released.

Fork: the library's threads do not exist in a child process. A child never calls the library
for a Loader of its parent: close() (and garbage collection, and exit) in the child only drop
Python references, and any other use raises LoaderForkedError saying to create the Loader in
each worker (fastload.torch.Dataset does that for torch DataLoader workers).
"""
from __future__ import annotations

import ctypes
import logging
import operator
import os
import threading
import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._native import fl_batch, fl_error
from .errors import (FL_E_INVALID, FL_E_UNSUPPORTED, CorruptRecordError, DataIOError, Error,  # noqa: F401
                     InvalidOptionError, LoaderClosedError, LoaderForkedError, UnsupportedError,
                     make_error)

_log = logging.getLogger("fastload")
_MAX_EPOCH = 1 << 40  # far beyond any run; keeps epoch * batches_per_epoch inside 64 bits

# Incremented in every child process after a fork: an object made under another value belongs to
# an ancestor process, whose library threads, locks and condition variables this one does not own.
_FORK_GEN = [0]


def _after_fork_in_child() -> None:
    _FORK_GEN[0] += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


def _raise(code: int, err: fl_error):
    msg = err.msg.decode("utf-8", "replace") if err.msg else ""
    if not msg:
        msg = _native.lib().fl_strerror(code).decode("utf-8", "replace")
    raise make_error(code, msg)


class _Slot:
    """Held (as `.slot`) by the ctypes buffers under a batch's arrays; its death means that no
    array over the slot is left. Holds nothing itself."""
    __slots__ = ("__weakref__",)


class _Ring:
    """Owns the C loader handle and the ring slots held by live arrays. Holds no reference to the
    Loader, so arrays outliving it keep only this (and the ring memory) alive."""

    def __init__(self, lib, handle, nslots: int):
        self.lib = lib
        self.handle = handle
        self.nslots = nslots
        self.gen = _FORK_GEN[0]
        self.held: Dict[weakref.ref, Any] = {}  # weakref of a live batch's _Slot -> fl_batch*
        self.dead: List[weakref.ref] = []  # weakrefs of dead _Slots (appended by list.append)
        self.stale = None         # a slot whose batch was copied: released at the next drain
        self.consumer: Optional[threading.Thread] = None  # the thread driving next()
        self.in_next = False      # the consumer is inside fl_loader_next
        self.closing = False      # close() was called with slots still held
        self.watch: List[weakref.ref] = []  # closing: the held slots, with a close callback
        self.lock = threading.Lock()

    def forked(self) -> bool:
        return self.gen != _FORK_GEN[0]

    @property
    def live(self) -> int:
        """Slots held by arrays that are still alive."""
        return sum(1 for wr in list(self.held) if wr() is not None)

    def hold(self) -> Tuple[_Slot, weakref.ref]:
        s = _Slot()
        return s, weakref.ref(s, self.dead.append)

    def drain(self) -> None:
        """Give back the slots whose arrays died and the copied batch's slot (consumer thread).
        Interrupted anywhere, it repeats the rest next time; a second release of a slot is
        ignored by the library (no fl_loader_next ran in between)."""
        if self.stale is not None:
            self.lib.fl_loader_release(self.handle, self.stale)
            self.stale = None
        while self.dead:
            wr = self.dead[-1]
            try:
                p = self.held.get(wr)
            except TypeError:
                # a dead weakref hashes only if it was hashed while alive: this slot died (an
                # interrupt between hold() and the commit) before it ever entered `held`
                p = wr = None
            if p is not None:
                self.lib.fl_loader_release(self.handle, p)
            if wr is not None:
                self.held.pop(wr, None)
            self.dead.pop()

    def close(self) -> None:
        """Close the handle now, or when the last held slot dies. In a forked child: forget it."""
        if self.forked():
            self.handle = None
            self.held = {}
            return
        with self.lock:
            if self.handle is None or self.closing:
                return
            if self.live == 0:
                h, self.handle = self.handle, None
                self.held = {}
                self.lib.fl_loader_close(h)
                return
            self.closing = True
            for wr in list(self.held):
                s = wr()
                if s is not None:
                    self.watch.append(weakref.ref(s, self._closing_death))

    def _closing_death(self, _wr) -> None:
        # Python code at an array's death, only after close() with arrays held: a Ctrl-C landing
        # here leaves the closed loader's memory to the process's end, nothing else
        if self.forked():
            return
        with self.lock:
            if self.handle is not None and self.live == 0:
                h, self.handle = self.handle, None
                self.held = {}
                self.watch = []
                self.lib.fl_loader_close(h)


def _array(slot: Optional[_Slot], ptr, shape: Tuple[int, ...], ctype, dtype) -> np.ndarray:
    """A numpy array of `shape` over the C memory at `ptr`, without copying: its base is a ctypes
    array over that memory that holds `slot` (so the slot lives as long as any view of it)."""
    count = 1
    for d in shape:
        count *= d
    if not ptr or count == 0:
        return np.empty(shape, dtype=dtype)
    buf = (ctype * count).from_address(ctypes.cast(ptr, ctypes.c_void_p).value)
    buf.slot = slot
    a = np.frombuffer(buf, dtype=dtype)
    return a.reshape(shape) if len(shape) > 1 else a


class Batch(tuple):
    """One batch: unpacks as (images, labels). Attributes: images (N,H,W,C uint8), labels
    (N int32), indices (N uint64 dataset record indices), epoch, batch (number within the epoch),
    last_in_epoch, skipped (corrupt records replaced), size (N), address (the images pointer), copied
    (True when the batch was copied out of the ring because the caller held every other slot).
    N is the batch size, or fewer for the short last batch of an epoch (drop_last=False).
    The arrays keep the batch's ring slot until the last of them (and of their views) is garbage;
    release() only drops this object's own claim (kept for compatibility).
    copy.copy shares the arrays (and so the slot); copy.deepcopy and pickle copy them, with the
    same attributes but address the copy's and no device buffers (they belong to the slot)."""

    def __new__(cls, images: np.ndarray, labels: np.ndarray, indices: np.ndarray, b: fl_batch,
                copied: bool):
        self = super().__new__(cls, (images, labels))
        self.images, self.labels, self.indices = images, labels, indices
        self.epoch, self.batch = int(b.epoch), int(b.batch)
        self.last_in_epoch = bool(b.last_in_epoch)
        self.skipped = int(b.skipped)
        self.address = images.ctypes.data if images.size else 0
        self.copied = copied
        self.size = len(labels)
        if copied:  # the device copies belong to the ring slot, which went back
            self.device_images = self.device_labels = self.event = self.stream = None
        else:
            self.device_images, self.device_labels = b.device_images, b.device_labels
            self.event, self.stream = b.event, b.stream
        self._released = False
        return self

    def __copy__(self) -> "Batch":
        c = tuple.__new__(Batch, self)
        c.__dict__.update(self.__dict__)
        return c

    def __reduce__(self):
        # tuple's own reduction calls Batch(images, labels), which takes the library's fl_batch
        state = {k: v for k, v in self.__dict__.items() if k not in ("images", "labels")}
        return _batch_from_state, (self.images, self.labels, state)

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        """Say the batch is no longer needed. Its slot goes back to the ring when its arrays (and
        their views) are garbage: nothing held is ever overwritten."""
        self._released = True

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc) -> bool:
        self.release()
        return False

    def __repr__(self) -> str:
        return (f"fastload.Batch(epoch={self.epoch}, batch={self.batch}, size={len(self.labels)}, "
                f"shape={self.images.shape}{', copied' if self.copied else ''})")


def _batch_from_state(images: np.ndarray, labels: np.ndarray, state: Dict[str, Any]) -> Batch:
    """A Batch of a deep copy or unpickling (Batch.__reduce__): its arrays are the copy's own."""
    b = tuple.__new__(Batch, (images, labels))
    b.__dict__.update(state)
    b.images, b.labels = images, labels
    b.address = images.ctypes.data if images.size else 0
    b.device_images = b.device_labels = b.event = b.stream = None
    return b


class FieldsBatch(dict):
    """One batch of a data set with more than the classic fields: a mapping from field name to
    numpy array, in schema order — image [N, H, W, C] uint8, int [N] int32, float [N] float32,
    int_list [N, M] int32, float_vector [N, n] float32, boxes [N, M, 4] float32 (x0 y0 x1 y1 in
    output pixels), mask [N, H, W] uint8/uint16, ndarray [N, ...], bytes/text [N, M] uint8 — and,
    for every variable field NAME (int_list, boxes, bytes, text), NAME_count [N] int32: how many
    of the M rows of sample i are real (padding rows are zeros; a field itself named NAME_count
    is refused with UnsupportedError, as the mapping cannot hold both). N is the batch size, or fewer for
    the short last batch. A data set without images (packdata pack --no-image: embeddings,
    features, tabular rows) has no image entry: the mapping is its fields only. Attributes as
    Batch: indices, epoch, batch, last_in_epoch, skipped, copied. The arrays keep the batch's
    ring slot while they live, as Batch's."""

    def __init__(self, arrays: Dict[str, np.ndarray], indices: np.ndarray, b: fl_batch,
                 copied: bool):
        super().__init__(arrays)
        self.indices = indices
        self.epoch, self.batch = int(b.epoch), int(b.batch)
        self.last_in_epoch = bool(b.last_in_epoch)
        self.skipped = int(b.skipped)
        self.copied = copied
        self.size = len(indices)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}{list(v.shape)}" for k, v in self.items())
        return f"fastload.FieldsBatch(epoch={self.epoch}, batch={self.batch}, {fields})"


_VARIABLE = {_native.FIELD_TYPE[t] for t in ("int_list", "boxes", "bytes", "text")}
_NP_DTYPE = {v: np.dtype(k) for k, v in _native.DTYPE.items()}


def _is_classic(b: fl_batch) -> bool:
    """A batch of a classification data set (image then int label): the (images, labels) tuple."""
    if b.num_fields == 0 or not b.fields:
        return True
    if b.num_fields != 2:
        return False
    return (b.fields[0].type, b.fields[1].type) == (_native.FIELD_TYPE["image"],
                                                    _native.FIELD_TYPE["int"])


def _field_arrays(slot: Optional[_Slot], b: fl_batch, n: int, copy: bool) -> Dict[str, np.ndarray]:
    """name -> array (and NAME_count) of the first n samples of every field of `b`: views
    holding `slot`, or copies."""
    out: Dict[str, np.ndarray] = {}
    for i in range(b.num_fields):
        f = b.fields[i]
        name = (f.name or b"field%d" % i).decode("utf-8", "replace")
        dt = _NP_DTYPE.get(f.dtype)
        if dt is None:
            raise UnsupportedError(FL_E_INVALID, f"fastload: field {name!r}: unknown dtype {f.dtype} "
                                   "(a newer library?)")
        shape = (n,) + tuple(int(f.shape[d]) for d in range(1, f.ndim))
        count = int(np.prod(shape)) if shape else 0
        a = _array(slot, f.data, (count * dt.itemsize,), ctypes.c_uint8, np.uint8)
        a = a.view(dt).reshape(shape)
        _clash(out, name)
        out[name] = a.copy() if copy else a
        if f.type in _VARIABLE:
            c = _array(slot, f.counts, (n,), ctypes.c_int32, np.int32)
            _clash(out, name + "_count")
            out[name + "_count"] = c.copy() if copy else c
    return out


def _clash(out: Dict[str, np.ndarray], key: str) -> None:
    """A field named as a variable field's count (boxes and boxes_count: packdata takes both
    names; field names are unique, so a clash is always that) would silently replace that count,
    or be replaced by it, in the mapping."""
    if key in out:
        var = key[:-len("_count")]
        raise UnsupportedError(FL_E_UNSUPPORTED, f"fastload: field {key!r} has the name of the count "
                               f"of variable field {var!r} in a batch's mapping, which cannot hold "
                               "both: re-pack the data set with another name for the field")


def _parse_augment(augment: Optional[str], flip: bool) -> Tuple[int, bool]:
    base, f = "none", _flag("flip", flip)
    for tok in str(augment or "none").replace("+", ",").split(","):
        tok = tok.strip()
        if tok == "flip":
            f = True
        elif tok in _native.AUGMENT:
            base = tok
        elif tok:
            raise InvalidOptionError(FL_E_INVALID, f"fastload: augment '{augment}': use rrc, center, "
                                     "object_crop or none, optionally ',flip'")
    return _native.AUGMENT[base], f


def default_order(augment: Optional[str] = "none", flip: bool = False) -> str:
    """The order a Loader uses when none is given: "random" when the augmentation is random
    (augment="rrc" or "object_crop", or flip), else "seq" — the C library's default, and a DataLoader's without
    shuffle (an evaluation set is read once, in order)."""
    aug, f = _parse_augment(augment, flip)
    return "random" if f or aug in (_native.AUGMENT["rrc"], _native.AUGMENT["object_crop"]) else "seq"


def _choice(name: str, value, table: Mapping[str, int]) -> int:
    if value not in table:
        raise InvalidOptionError(FL_E_INVALID, f"fastload: {name}={value!r}: expected one of "
                                 f"{sorted(set(table))}")
    return table[value]


def _integer(name: str, value) -> int:
    """`value` as an int (numpy's and 0-d tensors' too, not a bool), else InvalidOptionError."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise InvalidOptionError(FL_E_INVALID, f"fastload: {name}={value!r}: expected an integer") \
            from None


def _count(name: str, value, hi: Optional[int] = None) -> int:
    """`value` as a non-negative int (below `hi`), else InvalidOptionError (a ValueError)."""
    v = _integer(name, value)
    if v < 0 or (hi is not None and v >= hi):
        rng = f"[0, {hi})" if hi is not None else ">= 0"
        raise InvalidOptionError(FL_E_INVALID, f"fastload: {name}={v} out of range {rng}")
    return v


def _flag(name: str, value) -> bool:
    """`value` as a yes/no option: a bool (numpy's too) or the integers 0 and 1, else
    InvalidOptionError (bool("False") is True: a string must not turn an option on)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InvalidOptionError(FL_E_INVALID, f"fastload: {name}={value!r}: expected True or False")


def _int64(name: str, value) -> int:
    """`value` as a signed 64-bit integer (the C option is int64_t; negative has a meaning), else
    InvalidOptionError."""
    v = _integer(name, value)
    if not -(1 << 63) <= v < (1 << 63):
        raise InvalidOptionError(FL_E_INVALID, f"fastload: {name}={v} out of the 64-bit range")
    return v


def _size(size) -> Tuple[int, int]:
    """size= as (height, width): None -> (0, 0) (the data set's own size), an integer (numpy's and
    0-d torch tensors too) -> a square, else a pair; each in [0, 2^32) (the C fields are uint32),
    else InvalidOptionError naming it (a negative size wrapped to 4 G pixels)."""
    if size is None:
        return 0, 0

    def side(v, name):
        if isinstance(v, float) and v.is_integer():
            v = int(v)  # (224.0, 224.0) always worked
        return _count(name, v, 1 << 32)

    if not isinstance(size, bool):
        try:
            v = operator.index(size)
        except TypeError:
            pass
        else:
            return side(v, "size"), side(v, "size")
    try:
        pair = tuple(size) if not isinstance(size, (str, bytes)) else ()
    except TypeError:
        pair = ()
    if len(pair) != 2:
        raise InvalidOptionError(FL_E_INVALID, f"fastload: size={size!r}: expected None, an integer "
                                 "(a square) or (height, width)")
    return side(pair[0], f"size={size!r}: height"), side(pair[1], f"size={size!r}: width")


def _path(path):
    """A data set's path as the library takes it: str, bytes or os.PathLike, with a leading ~
    expanded (as torchvision's ImageFolder does: a path ported from it keeps working)."""
    return os.path.expanduser(os.fspath(path))


def _dataset_records(path: Union[str, "os.PathLike[str]"]) -> int:
    """Records in the data set at `path` (all ranks), as a Loader counts them: its shard
    indexes read and checked by the library (fl_dataset_open_summary), without a Loader (no
    threads, nothing decoded). Errors: as opening a Loader on `path`."""
    lib = _native.lib()
    p = _path(path)
    h, err = ctypes.c_void_p(), fl_error()
    if not hasattr(lib, "fl_dataset_open_summary"):  # an older library: a Loader counts them
        with Loader(p, batch_size=1, workers=1, prefetch=2) as L:
            return L.dataset_size
    rc = lib.fl_dataset_open_summary(os.fsencode(p), ctypes.byref(h), ctypes.byref(err))
    if rc:
        _raise(rc, err)
    try:
        return int(lib.fl_dataset_count(h))
    finally:
        lib.fl_dataset_close(h)


def _real_samples(n: int, per_rank: int, rank: int, world: int, drop_last: bool, quasi: bool,
                  exact: bool) -> int:
    """Samples of a rank's epoch that are handed out, of the `per_rank` positions of the
    library's plan (those past the end of the sequence it fills by wrapping around)."""
    r, w = rank, world
    if drop_last:
        return per_rank
    if exact:  # positions below n only: every record once over all the shares
        if quasi:
            return max(0, min(per_rank, n - r * per_rank))
        return max(0, min(per_rank, (n - r + w - 1) // w))
    if w == 1:
        return n
    if quasi:  # contiguous shares: the wrapped positions stay (equal counts per rank)
        return per_rank
    return (n + w - 1) // w  # DistributedSampler: ceil(n / world), the last round padded


def _epoch_batches(path: str, n: int, batch_size: int, rank: int, world: int, drop_last: bool,
                   order: str, exact: bool) -> int:
    """len(Loader(path, ...)) with these settings over a data set of n records, without opening
    one: the library's plan (fl_order_plan_init in loader/order.c) and _real_samples."""
    B = batch_size
    if n == 0:
        raise InvalidOptionError(FL_E_INVALID, f"{path}: dataset has no records")
    if drop_last:
        bpe = (n // world) // B
        if bpe == 0:  # the library's own message (fl_loader_create)
            raise InvalidOptionError(FL_E_INVALID, f"{path}: {n} records give no full batch of {B} "
                                     f"per rank for world {world} with drop_last")
    else:
        bpe = (-(-n // world) + B - 1) // B
    real = _real_samples(n, bpe * B, rank, world, drop_last, _native.ORDER[order] == 2, exact)
    return -(-real // B)


def _default_log(user, level, msg) -> None:
    (_log.warning if level else _log.info)(msg.decode("utf-8", "replace") if msg else "")


_ORDER_NAME = {0: "seq", 1: "random", 2: "quasi"}
_NULL = ctypes.POINTER(fl_batch)
Size = Union[None, int, Tuple[int, int], Sequence[int]]


class Loader:
    """Stream a packed dataset (made by packdata) as batches of numpy arrays.

    Loader(path, *, batch_size=256, workers=0, size=None, augment="none", flip=False,
           order=None, seed=0, rank=0, world=1, drop_last=False, io="auto", direct=False, ...)

    Every option is a keyword argument.
    path        dataset directory (shards or LMDB backend; str, bytes or PathLike, ~ expanded)
    batch_size  samples per batch
    workers     decode threads (0: one per online CPU)
    size        output (height, width), or an int for square; None: the dataset's fixed size
    augment     "rrc" (random-resized-crop), "center" (resize the shorter side to size /
                center_ratio, then crop the centre: evaluation), "none" (resize to size);
                "rrc,flip" also turns on flip
    flip        random horizontal flip (p = 0.5)
    scale, ratio  random-resized-crop ranges (defaults (0.08, 1.0), (3/4, 4/3))
    center_ratio  augment="center": the crop's share of the resized image (default 0.875, i.e.
                resize to 256 and crop 224)
    order       "seq", "random" (a permutation per epoch) or "quasi" (block shuffle); None (the
                default): "random" when the augmentation is random (rrc or flip), else "seq"
    seed        fixes shuffling and augmentation: same seed, same batches
    rank, world this process's share of every epoch in a data-parallel job
    drop_last   True: only full batches (the tail is dropped). False (default): every sample,
                the last batch shorter when the epoch does not divide (as a DataLoader's);
                with world > 1, each rank gets ceil(records / world) samples as with
                DistributedSampler (sequential and random orders)
    io          "auto", "uring", "pread", "mmap" or "memory";  direct: O_DIRECT reads
    memory_max  io="auto" reads raw-pixel datasets up to this many bytes into memory
                (0: 256 MiB and 1/16 of RAM; negative: never)
    decode      "accurate" (libjpeg's defaults) or "fast" (fast IDCT, box chroma upsampling)
    decode_memory  bytes of decode memory the workers share: each reserves what an image's
                decode can use and waits while the others leave too little; an image needing
                more than all of it is an error naming the record (0: 1 GiB; negative: unlimited)
    jpeg_index_memory  bytes of JPEG entry-point indexes the loader keeps (about 1.5 KiB a
                record, learned by its first decode): later epochs' crop decodes skip the
                Huffman data above and beside the crop, same pixels (0: 1/32 of RAM, at most
                512 MiB; negative: off)
    prefetch    batches in the ring (0: workers + 2, up to 16 for small batches within 8 MiB);
                on_corrupt: "error" or "skip"
    channels    1 or 3 (0: the dataset's)
    device      -1: host only; >= 0 the library also copies each batch to that CUDA device
    start_epoch, start_batch  resume position (see state_dict)
    quasi_block, quasi_window, queue_depth, pinned, log: see loader/fastload.h

    Iterating over a Loader yields the batches left in the current epoch as (images, labels)
    tuples (fastload.Batch), like a DataLoader; `epoch()` does the same; `batches(n)` streams
    across epochs. len() is the batches per epoch. A batch's ring slot goes back when its arrays
    are garbage (see Batch); while the caller holds all ring slots but one, batches come as
    copies (Batch.copied). Information: dataset_size, class_names, samples_per_epoch, io, stats(),
    workers (decode threads started). set_workers(n) (or active_workers = n) lets only n of them
    work from then on, mid-epoch too, with the same batches (the others wait).
    One consumer thread: the thread that first asks for a batch drives the loader; another thread
    asking gets a RuntimeError (position(), state_dict(), stats() may be read from any thread).
    One process: a Loader is not copied, pickled or used after os.fork (LoaderForkedError).
    A KeyboardInterrupt inside iteration loses no batch: the batch it interrupted comes next.
    Errors raise fastload.Error subclasses (see fastload.errors) with the library's message:
    CorruptRecordError, DataIOError (an OSError), InvalidOptionError and LoaderClosedError
    (ValueErrors), UnsupportedError, LoaderForkedError (a RuntimeError).
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], *, batch_size: int = 256,
                 workers: int = 0, size: Size = None, augment: str = "none", flip: bool = False,
                 order: Optional[str] = None, seed: int = 0, rank: int = 0, world: int = 1,
                 drop_last: bool = False, io: str = "auto", direct: bool = False,
                 prefetch: int = 0, channels: int = 0,
                 scale: Tuple[float, float] = (0.08, 1.0),
                 ratio: Tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
                 center_ratio: float = 0.875, on_corrupt: str = "error", pinned: bool = True,
                 device: int = -1, queue_depth: int = 0, quasi_block: int = 0,
                 quasi_window: int = 0, start_epoch: int = 0, start_batch: int = 0,
                 log: Optional[Callable[[int, str], None]] = None, decode: str = "accurate",
                 memory_max: int = 0, decode_memory: int = 0, jpeg_index_memory: int = 0,
                 _exact_shares: bool = False,
                 _max_batches: int = 0):
        self._handle = None
        self._ring: Optional[_Ring] = None
        self._lib = _native.lib()
        self.path = _path(path)
        aug, fl = _parse_augment(augment, flip)
        h, w = _size(size)
        if _count("batch_size", batch_size) < 1:
            raise InvalidOptionError(FL_E_INVALID, f"fastload: batch_size must be at least 1 (got {batch_size})")
        if _count("world", world) < 1 or _count("rank", rank) >= world:
            raise InvalidOptionError(FL_E_INVALID, f"fastload: rank {rank} must be in [0, world={world})")
        start_epoch = _count("start_epoch", start_epoch, _MAX_EPOCH)
        start_batch = _count("start_batch", start_batch)
        if order is None:
            order = default_order(augment, flip)
        po = _native.PaddedOptions()
        self._lib.fl_loader_options_init(ctypes.byref(po))
        o = po.s
        o.batch_size = int(batch_size)
        # the C fields are uint32: a negative or huge value would wrap silently (quasi_block=-1
        # became 4 G records)
        o.workers = _count("workers", workers, 1 << 32)
        if _count("prefetch", prefetch, 1 << 32):
            o.prefetch = int(prefetch)
        o.out_height, o.out_width = h, w
        if _count("channels", channels, 1 << 32):
            o.channels = int(channels)
        o.augment, o.flip = aug, int(fl)
        o.scale_min, o.scale_max = (float(v) for v in scale)
        o.ratio_min, o.ratio_max = (float(v) for v in ratio)
        o.center_ratio = float(center_ratio)
        o.order = _choice("order", order, _native.ORDER)
        if _count("quasi_block", quasi_block, 1 << 32):
            o.quasi_block = int(quasi_block)
        if _count("quasi_window", quasi_window, 1 << 32):
            o.quasi_window = int(quasi_window)
        o.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        o.rank, o.world = int(rank), int(world)
        drop_last = _flag("drop_last", drop_last)
        o.drop_last = int(drop_last)
        o.io = _choice("io", io, _native.IO)
        o.direct = int(_flag("direct", direct))
        if _count("queue_depth", queue_depth, 1 << 32):
            o.queue_depth = int(queue_depth)
        o.on_corrupt = _choice("on_corrupt", on_corrupt, _native.ON_CORRUPT)
        o.pinned = int(_flag("pinned", pinned))
        o.device = int(device)
        o.decode_flags = _choice("decode", decode, _native.DECODE)
        o.memory_max = _int64("memory_max", memory_max)
        o.decode_memory = _int64("decode_memory", decode_memory)
        o.jpeg_index_memory = _int64("jpeg_index_memory", jpeg_index_memory)
        # the library's max_batches: counted from the position each _open starts at; next_batch
        # past them raises (fastload.torch.Dataset reads exactly that many)
        o.max_batches = _count("_max_batches", _max_batches, 1 << 64)
        # the callback object must outlive the loader: keep it on self
        self._log_cb = _native.LOG_FN(
            (lambda u, lv, m: log(lv, m.decode("utf-8", "replace"))) if log else _default_log)
        o.log = self._log_cb
        self._opts = po
        self.seed = int(seed)
        self.order = _ORDER_NAME[o.order]
        self.rank, self.world = int(rank), int(world)
        self.drop_last = bool(drop_last)
        self._exact = bool(_exact_shares)
        self._prefetch = int(prefetch)
        self._workers = int(workers)
        self._active: Optional[int] = None  # set_workers(n): decode workers at work (None: all)
        self._current: Optional[Batch] = None  # the batch iteration handed out last
        self._open(start_epoch, start_batch)

    # ---- life cycle -------------------------------------------------------------------------
    def _open(self, epoch: int, batch: int) -> None:
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
        self._records = int(self._lib.fl_dataset_count(self._lib.fl_loader_dataset(h)))
        # ring slots as the library sized them
        self._ring = _Ring(self._lib, h, int(self._lib.fl_loader_prefetch(h)))
        self._handle = h
        self._nworkers = 0
        if hasattr(self._lib, "fl_loader_set_workers"):
            self._nworkers = int(self._lib.fl_loader_workers(h))
            if self._active is not None:  # set_workers survives load_state_dict (a new C loader)
                if self._active < self._nworkers:
                    self._lib.fl_loader_set_workers(h, self._active, ctypes.byref(fl_error()))
                else:
                    self._active = None
        self._bpe = bpe
        self._real = self._real_samples(bpe * self.batch_size)
        self._len = -(-self._real // self.batch_size)
        self._failed = False
        # the out-pointer fl_loader_next fills: non-NULL while a batch taken from the ring has not
        # reached the caller (a KeyboardInterrupt right after the C call); delivered next time
        self._out = _NULL()

    def _real_samples(self, per_rank: int) -> int:
        """Samples of this rank's epoch that are handed out; the library fills the rest of its
        `per_rank` positions (past the end of the sequence) by wrapping around."""
        return _real_samples(self._records, per_rank, self.rank, self.world, self.drop_last,
                             self.order == "quasi", self._exact)

    def _valid(self, batch: int) -> int:
        """Samples of batch `batch` (of an epoch) that are handed out."""
        B = self.batch_size
        return max(0, min(B, self._real - batch * B))

    def close(self) -> None:
        """Stop handing out batches. Arrays still held keep their memory: the ring (and the
        workers) are freed when the last of them is garbage, at once when none is held. In a
        forked child (the Loader was made by the parent) only the references are dropped."""
        r = self._ring
        if self._handle is None or r is None:
            return
        if not r.forked() and r.in_next and r.consumer is not None and \
                r.consumer.ident != threading.get_ident():
            raise RuntimeError("fastload: close() from another thread while the consumer "
                               "thread waits for a batch")
        self._current = None
        self._handle = None
        self._ring = None
        r.close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _no_copy(self, what: str):
        return TypeError(f"fastload.Loader cannot be {what}: it owns the library's worker threads "
                         "and batch ring. Create another Loader with the same arguments (its "
                         "state_dict() / load_state_dict() continue exactly where one stopped); "
                         "in DataLoader workers, create it in each worker (fastload.torch.Dataset)")

    def __copy__(self):
        raise self._no_copy("copied")

    def __deepcopy__(self, memo):
        raise self._no_copy("copied")

    def __reduce_ex__(self, protocol):
        raise self._no_copy("pickled")

    def _closed(self) -> LoaderClosedError:
        return LoaderClosedError(-22, f"{self.path}: loader is closed")

    def _check_handle(self) -> None:
        if self._handle is None:
            raise self._closed()
        if self._ring.forked():
            raise LoaderForkedError(
                FL_E_INVALID, f"fastload: this Loader ({self.path}) was created in another process "
                "(before os.fork, e.g. by the parent of a DataLoader worker); its worker threads "
                "and ring are not in this process. Create the Loader in each process or worker "
                "(in worker_init_fn or the Dataset's __iter__; fastload.torch.Dataset does this)")

    def _check_open(self) -> None:
        self._check_handle()
        if self._failed:
            raise LoaderClosedError(-22, f"{self.path}: loader failed earlier; create a new one")

    # ---- batches ----------------------------------------------------------------------------
    def next_batch(self) -> Union[Batch, FieldsBatch]:
        """The next batch in order (see Batch: its arrays keep its slot while they live): the
        (images, labels) Batch of a classification data set, a FieldsBatch mapping of any other."""
        self._check_open()
        r = self._ring
        me = threading.current_thread()
        c = r.consumer
        if c is not me:
            if c is not None and c.is_alive():
                raise RuntimeError(f"fastload: this Loader is consumed by thread {c.name!r}; a "
                                   "Loader has one consumer thread (create one Loader per thread)")
            r.consumer = me
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
        n, h, w, ch = self._valid(int(b.batch)), b.height, b.width, b.channels
        null = _NULL()
        if not _is_classic(b):
            zero_copy = n and len(r.held) + 1 < r.nslots
            slot, wr = r.hold() if zero_copy else (None, None)
            arrays = _field_arrays(slot, b, n, copy=not zero_copy)
            indices = _array(slot, b.indices, (n,), ctypes.c_uint64, np.uint64)
            fb = FieldsBatch(arrays, indices if zero_copy else indices.copy(), b, not zero_copy)
            fb.kinds = {(b.fields[i].name or b"").decode("utf-8", "replace"): int(b.fields[i].type)
                        for i in range(b.num_fields)}
            if zero_copy:  # commit as below
                r.held[wr] = out
                self._out = null
                return fb
            r.stale = out
            self._out = null
            return fb
        if n and len(r.held) + 1 < r.nslots:  # zero-copy: the arrays hold the slot
            slot, wr = r.hold()
            images = _array(slot, b.images, (n, h, w, ch), ctypes.c_uint8, np.uint8)
            labels = _array(slot, b.labels, (n,), ctypes.c_int32, np.int32)
            indices = _array(slot, b.indices, (n,), ctypes.c_uint64, np.uint64)
            batch = Batch(images, labels, indices, b, False)
            # commit: stores only, then return (no KeyboardInterrupt can land in between)
            r.held[wr] = out
            self._out = null
            return batch
        # the caller holds every other slot: copy; the slot goes back at the next call
        images = _array(None, b.images, (n, h, w, ch), ctypes.c_uint8, np.uint8).copy()
        labels = _array(None, b.labels, (n,), ctypes.c_int32, np.int32).copy()
        indices = _array(None, b.indices, (n,), ctypes.c_uint64, np.uint64).copy()
        batch = Batch(images, labels, indices, b, True)
        r.stale = out
        self._out = null
        return batch

    def release(self) -> None:
        """Drop the loader's reference to the batch iteration handed out last."""
        self._current = None

    def epoch(self) -> Iterator[Batch]:
        """Iterate over the batches left in the current epoch (all of them at an epoch start)."""
        self._check_open()
        e, _ = self.position()
        while self.position()[0] == e:
            self._current = None
            b = self.next_batch()
            last = b.last_in_epoch
            if b.size or not self._exact:
                self._current = b
                yield b
            del b
            if last:
                break
        self._current = None

    __iter__ = epoch

    def batches(self, n: Optional[int] = None) -> Iterator[Batch]:
        """Stream batches across epoch boundaries: n of them, or without end when n is None."""
        i = 0
        while n is None or i < n:
            self._current = None
            b = self.next_batch()
            if b.size or not self._exact:
                self._current = b
                yield b
                i += 1
            del b
        self._current = None

    def __len__(self) -> int:
        self._check_handle()
        return self._len

    # ---- position / resume ------------------------------------------------------------------
    def position(self) -> Tuple[int, int]:
        """(epoch, batch) of the next batch the loader will hand out."""
        self._check_open()
        out = self._out
        if out:  # taken from the ring by an interrupted call: it is the next one
            return int(out.contents.epoch), int(out.contents.batch)
        e, b = ctypes.c_uint64(), ctypes.c_uint64()
        self._lib.fl_loader_position(self._handle, ctypes.byref(e), ctypes.byref(b))
        return int(e.value), int(b.value)

    def _settings(self) -> Dict[str, Any]:
        s = {"batch_size": self.batch_size, "world": self.world, "order": self.order,
             "drop_last": self.drop_last, "records": self._records}
        if self.order == "quasi":
            s["quasi_block"] = int(self._opts.s.quasi_block)
            s["quasi_window"] = int(self._opts.s.quasi_window)
        return s

    def state_dict(self) -> Dict[str, Any]:
        """Where the stream stands: {'epoch', 'batch', 'seed'} and the settings that give batch
        numbers their meaning (batch_size, world, order, drop_last, records, and quasi_block /
        quasi_window in quasi order). A loader given this state (same dataset and options)
        continues with exactly the batches this one would produce next."""
        e, b = self.position()
        return dict({"epoch": e, "batch": b, "seed": self.seed}, **self._settings())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restart at state['epoch'], state['batch'] (from state_dict()). Arrays still held keep
        their memory. Raises ValueError (InvalidOptionError), leaving the loader unchanged, for a
        state that is not a mapping with integer 'epoch' and 'batch' in range, that was saved
        with another seed, or, mid-epoch, with another batch_size, world, order, drop_last,
        quasi_block / quasi_window or dataset size (the batch number would point elsewhere in
        the epoch). A mid-epoch state of another batch_size is converted when it is exact:
        sequential or random order, same world, and the samples done a multiple of this
        loader's batch_size. A state at an epoch start (batch 0) fits any of these settings;
        states without the settings (older versions) are taken as they are."""
        self._check_handle()
        try:
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
        b = _count("state batch", state["batch"])
        if b:
            b = self._convert_batch(state, b)
        b = _count("state batch", b, self._bpe)
        self.close()
        self._open(e, b)

    def _convert_batch(self, state: Mapping[str, Any], b: int) -> int:
        """Batch `b` of a state saved with other settings, in this loader's batches (or an
        InvalidOptionError naming the setting that differs)."""
        mine = self._settings()
        for key in ("records", "world", "order", "quasi_block", "quasi_window", "drop_last",
                    "batch_size"):
            if key not in state or key not in mine or state[key] == mine[key]:
                continue
            theirs = state[key]
            if key == "batch_size" and self.order != "quasi":
                try:
                    done = _count("state batch_size", theirs) * b
                except InvalidOptionError:
                    done = -1
                if done >= 0 and done % self.batch_size == 0:
                    return done // self.batch_size
            raise InvalidOptionError(
                FL_E_INVALID, f"fastload: state was saved mid-epoch (batch {b}) with {key}="
                f"{theirs!r}, this loader has {key}={mine[key]!r}: its batch number would skip or "
                f"repeat samples of the epoch. Create the Loader with {key}={theirs!r} to resume, "
                "or resume at the epoch's start ({'epoch': e, 'batch': 0})")
        return b

    # ---- information ------------------------------------------------------------------------
    @property
    def batches_per_epoch(self) -> int:
        return len(self)

    @property
    def samples_per_epoch(self) -> int:
        """Samples this rank's epoch hands out (the short last batch counted as it is)."""
        self._check_handle()
        return self._real

    @property
    def batch_size(self) -> int:
        return int(self._opts.s.batch_size)

    @property
    def workers(self) -> int:
        """Decode threads the loader started (the `workers` option; 0 there: one per online
        CPU). set_workers(n) lets only n of them work; active_workers says how many do."""
        self._check_handle()
        self._need_set_workers()
        return self._nworkers

    def _need_set_workers(self) -> None:
        if not hasattr(self._lib, "fl_loader_set_workers"):
            raise UnsupportedError(FL_E_UNSUPPORTED, f"fastload: {_native.library_path()} has no "
                                   "fl_loader_workers / fl_loader_set_workers (an older library)")

    @property
    def active_workers(self) -> int:
        """Decode workers at work: all of them (`workers`) unless set_workers(n) said n.
        Assigning to it calls set_workers."""
        self._check_handle()
        return self.workers if self._active is None else self._active

    @active_workers.setter
    def active_workers(self, n: int) -> None:
        self.set_workers(n)

    def set_workers(self, n: int) -> None:
        """Let only n (1 <= n <= workers) decode workers work from now on; the others finish the
        samples they hold and wait until a later call lets them work again (all of them work
        from creation). Batches stay byte-identical: order and augmentation do not depend on
        which worker decodes. Any thread, any time, mid-epoch too; kept across
        load_state_dict. InvalidOptionError (a ValueError) with the library's message for n
        out of range (nothing changes) or not an integer; LoaderClosedError after close(),
        LoaderForkedError in a forked child."""
        r = self._ring
        self._check_handle()
        self._need_set_workers()
        try:
            if isinstance(n, bool):
                raise TypeError
            v = operator.index(n)
        except TypeError:
            raise InvalidOptionError(FL_E_INVALID, f"fastload: set_workers({n!r}): expected an "
                                     "integer") from None
        total = self._nworkers
        if not 0 <= v <= 0xFFFFFFFF:  # the C argument is a uint32: its message, unwrapped
            raise InvalidOptionError(FL_E_INVALID, f"{v} decode workers asked for: the loader has "
                                     f"{total}")
        err = fl_error()
        with r.lock:  # close() from another thread frees the C loader under this lock
            if r.handle is None or r.closing:
                raise self._closed()
            rc = self._lib.fl_loader_set_workers(r.handle, v, ctypes.byref(err))
        if rc:
            _raise(rc, err)
        self._active = None if v == total else v

    @property
    def dataset_size(self) -> int:
        """Records in the dataset (all ranks)."""
        self._check_handle()
        return self._records

    @property
    def class_names(self) -> List[str]:
        """The dataset's class names (label i is class_names[i]); [] when it has none."""
        self._check_handle()
        ds = self._lib.fl_loader_dataset(self._handle)
        try:
            n = self._lib.fl_dataset_num_classes(ds)
            return [(self._lib.fl_dataset_class_name(ds, i) or b"").decode("utf-8", "replace")
                    for i in range(n)]
        except AttributeError:
            return []

    @property
    def io(self) -> str:
        """How records are read, decided when the loader opened, in words: backend, O_DIRECT or
        buffered, and why `io="auto"` chose O_DIRECT (e.g. "io_uring, O_DIRECT (io auto: the
        data set (1100.0 MiB) is larger than the page cache it can expect (256.0 MiB, cgroup
        memory limit))")."""
        self._check_handle()
        if not hasattr(self._lib, "fl_loader_io_describe"):
            return ""
        return (self._lib.fl_loader_io_describe(self._handle) or b"").decode("utf-8", "replace")

    @property
    def direct(self) -> bool:
        """True when records are read with O_DIRECT (asked for, or chosen by io="auto")."""
        self._check_handle()
        return bool(hasattr(self._lib, "fl_loader_direct") and self._lib.fl_loader_direct(self._handle))

    def stats(self) -> Dict[str, Any]:
        """Loader counters: images, batches, bytes_read, skipped, time per stage (seconds summed
        over workers), wall_s, io_backend, io (how records are read, as `io`), pinned_bytes,
        decode_memory_peak (bytes reserved at once, at most), decode_memory_wait_s,
        jpeg_index_bytes (JPEG entry-point indexes held)."""
        self._check_open()
        ps = _native.PaddedStats()
        self._lib.fl_loader_stats_get(self._handle, ctypes.byref(ps))
        s = ps.s
        d = {name: getattr(s, name) for name, _ in s._fields_}
        d["io_backend"] = (s.io_backend or b"").decode()
        d["io"] = self.io
        return d

    def __repr__(self) -> str:
        if self._handle is None:
            state = "closed"
        elif self._ring.forked():
            state = "of another process"
        else:
            state = "epoch %d batch %d" % self.position()
        return f"fastload.Loader({self.path!r}, batch_size={self.batch_size}, {state})"
