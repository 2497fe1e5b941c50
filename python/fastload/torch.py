"""fastload.torch — a fastload Loader as a PyTorch iterable of (images, labels) tensors.

    import fastload.torch as ft
    loader = ft.Loader("data/packed", batch_size=256, size=224, augment="rrc", flip=True,
                       device="cuda", dtype=torch.bfloat16, layout="channels_last")
    for epoch in range(start, epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:          # one epoch, like a DataLoader
            ...
        ckpt = {"loader": loader.state_dict()} # exact, also mid-epoch

torch is imported only when a Loader is made, so `import fastload` never needs it.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.context
import os
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from . import loader as _loader
from .errors import FL_E_INVALID, InvalidOptionError, UnsupportedError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_PENDING_MAX = 2  # device batches whose copy / reads may still run: more waits for the oldest


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("fastload.torch needs torch (pip install torch, or Debian python3-torch)") from e
    return torch


def _bad(msg: str) -> InvalidOptionError:
    return InvalidOptionError(FL_E_INVALID, "fastload.torch: " + msg)


def rank_world(rank: Optional[int] = None, world: Optional[int] = None) -> Tuple[int, int]:
    """(rank, world) of this process: the arguments when given, else torch.distributed's when it
    is initialized, else $RANK / $WORLD_SIZE (as torchrun sets them), else (0, 1)."""
    if rank is not None and world is not None:
        return int(rank), int(world)
    torch = _torch()
    d = torch.distributed
    if d.is_available() and d.is_initialized():
        r, w = d.get_rank(), d.get_world_size()
    elif "WORLD_SIZE" in os.environ:
        try:
            w = int(os.environ["WORLD_SIZE"])
            r = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))
        except ValueError:
            raise _bad(f"RANK={os.environ.get('RANK')!r} / WORLD_SIZE={os.environ['WORLD_SIZE']!r}: "
                       "expected integers") from None
    else:
        r, w = 0, 1
    return (r if rank is None else int(rank)), (w if world is None else int(world))


def _dtype(torch, dtype):
    if dtype is None:
        return None
    names = {"float32": torch.float32, "float": torch.float32, "bfloat16": torch.bfloat16,
             "bf16": torch.bfloat16, "float16": torch.float16, "half": torch.float16,
             "fp16": torch.float16, "uint8": None}
    if isinstance(dtype, str):
        if dtype not in names:
            raise _bad(f"dtype={dtype!r}: expected None (uint8 NHWC), float32, bfloat16 or float16")
        return names[dtype]
    if dtype == torch.uint8:
        return None
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise _bad(f"dtype={dtype!r}: expected None (uint8 NHWC), float32, bfloat16 or float16")
    return dtype


def _per_channel(name, v, c, default):
    if v is None:
        v = default
    if isinstance(v, (int, float)):
        v = (float(v),) * c
    v = tuple(float(x) for x in v)
    if len(v) != c:
        raise _bad(f"{name} has {len(v)} values for {c} channels")
    return v


class _Feeder:
    """Turns fastload Batches into torch tensors on `device` (shared by Loader and the old
    torch_batches). CUDA: the uint8 batch goes over (the loader's own device copy, or torch's
    non_blocking copy from pinned memory on a side stream); the batch's ring slot is kept until an
    event says the copy (and, for the loader's device buffers, the conversion reading them) is
    done; then the conversion runs on the current stream."""

    def __init__(self, device, dtype, layout, mean, std, loader_device=False):
        torch = self.torch = _torch()
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.dtype = _dtype(torch, dtype)
        if layout not in ("nchw", "channels_last"):
            raise _bad(f"layout={layout!r}: expected 'nchw' or 'channels_last'")
        self.format = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        self.mean, self.std = mean, std
        self.loader_device = loader_device
        self.cuda = self.device.type == "cuda"
        self.side = torch.cuda.Stream(self.device) if self.cuda else None
        self.pending = []     # (torch.cuda.Event, Batch): the slot is kept until the event is done
        self.consts = {}      # channels -> (scale, shift) tensors on the device

    def _affine(self, c):
        if c not in self.consts:
            default_m = IMAGENET_MEAN if c == 3 else (0.5,) * c
            default_s = IMAGENET_STD if c == 3 else (0.5,) * c
            m = _per_channel("mean", self.mean, c, default_m)
            s = _per_channel("std", self.std, c, default_s)
            if min(s) <= 0:
                raise _bad(f"std={s}: must be positive")
            # (x / 255 - mean) / std = x * scale - shift: one multiply and one subtract, in float32
            t = self.torch
            scale = t.tensor([1.0 / (255.0 * v) for v in s], dtype=t.float32).view(1, c, 1, 1)
            shift = t.tensor([a / b for a, b in zip(m, s)], dtype=t.float32).view(1, c, 1, 1)
            self.consts[c] = (scale.to(self.device), shift.to(self.device))
        return self.consts[c]

    def _convert(self, x):
        """uint8 NHWC on the device -> the output tensor (on the current stream)."""
        t = self.torch
        if self.dtype is None:
            return x
        n, h, w, c = x.shape
        scale, shift = self._affine(c)
        f = t.empty((n, c, h, w), dtype=t.float32, device=x.device, memory_format=self.format)
        f.copy_(x.permute(0, 3, 1, 2))
        f.mul_(scale).sub_(shift)
        # .to keeps the memory format (preserve_format)
        return f if self.dtype == t.float32 else f.to(self.dtype)

    def _retire(self, wait_all=False):
        keep = _PENDING_MAX - 1 if not wait_all else 0  # room for the batch about to come
        while self.pending and (len(self.pending) > keep or self.pending[0][0].query()):
            ev, _ = self.pending.pop(0)
            ev.synchronize()
        if wait_all:
            self.pending.clear()

    def make_room(self):
        """Before asking the loader for a batch: keep at most _PENDING_MAX - 1 slots held, so the
        ring has a free slot and the batch comes zero-copy (with the device buffers)."""
        if self.pending:
            self._retire()

    def _mapping(self, b):
        """A FieldsBatch -> {name: tensor} on the device: the image field converted as images
        are (dtype, layout, mean, std), every other array as it is (int32 counts included) but
        uint16 ones, which come as int32 (see _host)."""
        t = self.torch
        image = _loader._native.FIELD_TYPE["image"]
        kinds = getattr(b, "kinds", {})
        host = {k: _host(t, v) for k, v in b.items()}
        if not self.cuda:
            out = {k: (v if self.device.type == "cpu" else v.to(self.device)) for k, v in host.items()}
        else:
            self._retire()
            cur = t.cuda.current_stream(self.device)
            with t.cuda.stream(self.side):
                out = {k: v.to(self.device, non_blocking=True) for k, v in host.items()}
                ev = t.cuda.Event()
                ev.record(self.side)  # after the copies out of the pinned slot
            cur.wait_event(ev)
            for v in out.values():
                v.record_stream(cur)
            self.pending.append((ev, b))
        for k in out:
            if kinds.get(k) == image:
                out[k] = self._convert(out[k])
        return out

    def __call__(self, b):
        t = self.torch
        if isinstance(b, dict):
            return self._mapping(b)
        x = t.from_numpy(b.images)   # the numpy array holds the slot; the tensor holds the array
        y = t.from_numpy(b.labels)
        if not self.cuda:
            if self.device.type != "cpu":
                x = x.to(self.device)
            return self._convert(x), y.to(self.device, t.int64)
        self._retire()
        cur = t.cuda.current_stream(self.device)
        if self.loader_device and b.device_images:
            # the loader copied the batch into its slot's device buffers on its own stream
            cur.wait_stream(t.cuda.ExternalStream(b.stream, device=self.device))
            xd = t.as_tensor(_CudaArray(b.device_images, tuple(x.shape), "|u1", b),
                             device=self.device)
            yd = t.as_tensor(_CudaArray(b.device_labels, tuple(y.shape), "<i4", b),
                             device=self.device)
            # outputs of our own: the device buffers are refilled once the slot goes back
            out = self._convert(xd) if self.dtype is not None else xd.clone()
            labels = yd.to(t.int64)
            ev = t.cuda.Event()
            ev.record(cur)  # after the reads of the slot's device buffers
        else:
            with t.cuda.stream(self.side):
                xd = x.to(self.device, non_blocking=True)
                yd = y.to(self.device, non_blocking=True)
                ev = t.cuda.Event()
                ev.record(self.side)  # after the copies out of the pinned slot
            cur.wait_event(ev)
            xd.record_stream(cur)  # made on the side stream, used on this one
            yd.record_stream(cur)
            out = self._convert(xd)
            labels = yd.to(t.int64)
        self.pending.append((ev, b))
        return out, labels

    def close(self):
        if self.cuda:
            self._retire(wait_all=True)


def _host(torch, a):
    """A field's numpy array as a CPU tensor over the same memory, but uint16 (a mask of more
    than 254 classes, an ndarray field) widened to an int32 copy: torch before 2.3 has no uint16
    (from_numpy raises TypeError), later versions only limited support for it."""
    if a.dtype == _loader.np.uint16:
        return torch.from_numpy(a.astype(_loader.np.int32))
    return torch.from_numpy(a)


class _CudaArray:
    """__cuda_array_interface__ (v2) over the loader's device buffer; holds the batch (its slot)."""

    def __init__(self, ptr, shape, typestr, batch):
        self.batch = batch
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (int(ptr), False), "version": 2}


class DatasetInfo:
    """`loader.dataset`: what training and evaluation scripts read from a DataLoader's dataset.
    len() is the dataset's records (all ranks); classes / class_to_idx as torchvision's
    ImageFolder; root / path the dataset directory."""

    def __init__(self, loader: "_loader.Loader"):
        self.root = self.path = loader.path
        self._size = loader.dataset_size
        self.classes: List[str] = loader.class_names
        self.class_to_idx: Dict[str, int] = {c: i for i, c in enumerate(self.classes)}

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"fastload.torch.DatasetInfo({self.root!r}, {self._size} records, {len(self.classes)} classes)"


class _Sampler:
    """`loader.sampler`: set_epoch(e) as on a DistributedSampler (it calls loader.set_epoch)."""

    def __init__(self, loader: "Loader"):
        self._loader = loader

    def set_epoch(self, epoch: int) -> None:
        self._loader.set_epoch(epoch)


class Loader:
    """A fastload dataset as an iterable of (images, labels) torch tensors, one epoch per pass.

    Loader(path, *, batch_size=256, size=None, augment="none", flip=False, order=None, seed=0,
           workers=0, drop_last=False, device="cpu", dtype=None, layout="nchw", mean=None,
           std=None, rank=None, world=None, loader_device="auto", batch_transform=None,
           **loader_kwargs)

    Every option is a keyword argument; the loading options and their defaults are those of
    fastload.Loader (order None: "random" with random augmentation, else "seq"; drop_last=False:
    every sample once, the last batch shorter, as a DataLoader).
    device      torch device of the tensors ("cpu", "cuda", "cuda:1"; "cuda" = the current one)
    dtype       None: images are uint8 N×H×W×C as the loader makes them (layout ignored); on the
                CPU without a copy (the tensor keeps the batch's ring slot until it is garbage).
                torch.float32 / bfloat16 / float16 (or their names): converted on `device` to
                N×C×H×W, layout "nchw" (contiguous) or "channels_last", normalized as
                (x / 255 - mean) / std, computed in float32.
    mean, std   per channel (a sequence) or one number for all. None = the default: ImageNet's
                for 3 channels, 0.5 / 0.5 for other channel counts. For x / 255 only, pass
                mean=0, std=1.
    rank, world None: from torch.distributed when initialized, else $RANK / $WORLD_SIZE, else 0 / 1
                (see rank_world), so a torchrun / DDP script needs no arguments.
    loader_device  CUDA only: "auto" uses the library's own device mode (it copies each batch to
                the GPU on its own stream) when the library can, else torch copies the uint8 batch
                from pinned memory with non_blocking on a side stream; True requires the former,
                False uses the latter.
    batch_transform  called on every batch after it is on `device` and converted:
                batch_transform(images, labels) -> what the loop gets (e.g. torchvision's
                MixUp / CutMix, which take and return (images, labels)).
    loader_kwargs  passed to fastload.Loader (io, prefetch, decode, on_corrupt, scale, ratio,
                center_ratio, channels, ...)

    labels are int64 tensors on `device`. len() is the batches per epoch; `dataset` (len() =
    records, classes), `sampler.set_epoch`, `batch_size`, `loader` (the fastload.Loader) as a
    DataLoader's. Iterating yields the batches left in the current epoch. set_epoch(e) moves to
    the start of epoch e unless the loader is already inside epoch e (so a state loaded mid-epoch
    survives the usual set_epoch call before the epoch's loop). `workers`, `active_workers` and
    set_workers(n) as fastload.Loader's (fewer decode workers at work, same batches).
    state_dict() / load_state_dict() resume exactly, also mid-epoch; a KeyboardInterrupt loses
    no batch. Errors are fastload.errors classes, unchanged. One consumer thread and one process, as fastload.Loader
    (for torch.utils.data.DataLoader workers use fastload.torch.Dataset).
    """

    def __init__(self, path, *, batch_size: int = 256, size=None, augment: str = "none",
                 flip: bool = False, order: Optional[str] = None, seed: int = 0, workers: int = 0,
                 drop_last: bool = False, device: Any = "cpu", dtype: Any = None,
                 layout: str = "nchw", mean: Any = None, std: Any = None,
                 rank: Optional[int] = None, world: Optional[int] = None,
                 loader_device: Any = "auto",
                 batch_transform: Optional[Callable[..., Any]] = None, **loader_kwargs: Any):
        self._loader = None
        torch = _torch()
        rank, world = rank_world(rank, world)
        dev = torch.device(device)
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        if loader_device not in ("auto", True, False):
            raise _bad(f"loader_device={loader_device!r}: expected 'auto', True or False")
        if batch_transform is not None and not callable(batch_transform):
            raise _bad(f"batch_transform={batch_transform!r}: expected a callable")
        kw = dict(batch_size=batch_size, size=size, augment=augment, flip=flip, order=order,
                  seed=seed, workers=workers, drop_last=drop_last, rank=rank, world=world,
                  **loader_kwargs)
        use_dev = False
        if dev.type == "cuda" and loader_device is not False:
            try:
                self._loader = _loader.Loader(path, device=dev.index, **kw)
                use_dev = True
            except UnsupportedError:
                if loader_device is True:
                    raise
        if self._loader is None:
            self._loader = _loader.Loader(path, **kw)
        self.loader_device = use_dev
        self.rank, self.world = rank, world
        self.batch_transform = batch_transform
        self._held = None  # a batch taken from the loader whose tensors did not reach the loop
        try:  # mean / std are checked against the channels at the first batch
            self._feed = _Feeder(dev, dtype, layout, mean, std, loader_device=use_dev)
            self.dataset = DatasetInfo(self._loader)
        except Exception:
            self._loader.close()
            raise
        self.sampler = _Sampler(self)

    @property
    def loader(self) -> "_loader.Loader":
        """The underlying fastload.Loader."""
        return self._loader

    @property
    def device(self):
        return self._feed.device

    @property
    def batch_size(self) -> int:
        return self._loader.batch_size

    @property
    def drop_last(self) -> bool:
        return self._loader.drop_last

    @property
    def workers(self) -> int:
        """Decode threads the loader started (fastload.Loader.workers)."""
        return self._loader.workers

    @property
    def active_workers(self) -> int:
        """Decode workers at work (fastload.Loader.active_workers); assigning calls set_workers."""
        return self._loader.active_workers

    @active_workers.setter
    def active_workers(self, n: int) -> None:
        self._loader.set_workers(n)

    def set_workers(self, n: int) -> None:
        """Let only n (1 <= n <= workers) decode workers work from now on, mid-epoch too; the
        batches stay the same (fastload.Loader.set_workers, same errors)."""
        self._loader.set_workers(n)

    def __len__(self) -> int:
        return len(self._loader)

    def _no_copy(self, what):
        return TypeError(f"fastload.torch.Loader cannot be {what}: it owns the library's worker "
                         "threads and batch ring; create another one with the same arguments (for "
                         "DataLoader workers: fastload.torch.Dataset)")

    def __copy__(self):
        raise self._no_copy("copied")

    def __deepcopy__(self, memo):
        raise self._no_copy("copied")

    def __reduce_ex__(self, protocol):
        raise self._no_copy("pickled")

    def position(self) -> Tuple[int, int]:
        """(epoch, batch) of the next batch the loop gets."""
        h = self._held
        return (h.epoch, h.batch) if h is not None else self._loader.position()

    def __iter__(self) -> Iterator[Any]:
        L = self._loader
        e = self.position()[0]
        out = None
        while self.position()[0] == e:
            if self._held is None:
                self._feed.make_room()
                self._held = L.next_batch()
            b = self._held
            last = b.last_in_epoch
            if b.size:
                out = self._feed(b)
                if self.batch_transform is not None:
                    out = (self.batch_transform(out) if isinstance(out, dict)
                           else self.batch_transform(*out))
            del b
            # commit: a KeyboardInterrupt before here hands the same batch out again
            self._held = None
            if out is not None:
                yield out
            out = None
            if last:
                break

    def set_epoch(self, epoch: int) -> None:
        """Go to the start of `epoch`, unless the loader is already inside it."""
        e = _loader._count("epoch", epoch, _loader._MAX_EPOCH)
        if self.position()[0] != e:
            self._held = None
            self._feed.close()
            self._loader.load_state_dict({"epoch": e, "batch": 0})

    def state_dict(self) -> Dict[str, Any]:
        """{'epoch', 'batch', 'seed', ...} of the next batch: pass to load_state_dict to continue
        (see fastload.Loader.state_dict)."""
        s = self._loader.state_dict()
        s["epoch"], s["batch"] = self.position()
        return s

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        held = self._held
        self._held = None
        self._feed.close()
        try:
            self._loader.load_state_dict(state)
        except Exception:
            self._held = held
            raise

    def close(self) -> None:
        """Stop the loader. Tensors handed out stay valid (CPU uint8 ones keep their slot)."""
        if self._loader is not None:
            self._held = None
            self._feed.close()
            self._loader.close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        return (f"fastload.torch.Loader({self._loader.path!r}, batch_size={self.batch_size}, "
                f"device={str(self.device)!r}, rank={self.rank}, world={self.world})")


def detection_targets(batch: Mapping[str, Any], *, label_offset: int = 1, boxes: str = "boxes",
                      labels: str = "labels", mask: Optional[str] = "mask") -> List[Dict[str, Any]]:
    """The per-image target dicts torchvision's detection models take, from a batch of
    fastload.torch.Loader over a detection data set (a mapping with BOXES, BOXES_count, LABELS):

        for b in loader:
            images = list(b["image"])                  # dtype="float32": [C, H, W] each
            loss = sum(model(images, ft.detection_targets(b)).values())

    Each dict: "boxes" float32 [n, 4] (x0 y0 x1 y1, output pixels), "labels" int64 [n] = the
    class index + `label_offset` — 1 by default, because torchvision's detection models reserve
    label 0 for the background (build them with num_classes = len(classes) + 1); pass 0 for models
    that do not. With a mask field (`mask`, the semantic mask: 0 background, class index + 1):
    "masks" uint8 [k, H, W], one binary mask per class present in the image, and "mask_labels"
    int64 [k] their labels (class index + label_offset). A semantic mask does not separate the
    objects of one class, so these masks are per class, not per box: Mask R-CNN's per-instance
    mask loss needs instance masks, which a semantic mask field cannot give. The tensors stay on
    the batch's device. An image whose LABELS_count is not its BOXES_count raises
    InvalidOptionError: labels packed as an int_list of their own (--jsonl/--csv --field) are not
    attached to the boxes, so a crop that drops boxes keeps all the labels (--coco's are)."""
    torch = _torch()
    bx, lb = batch[boxes], batch[labels]
    counts = batch[boxes + "_count"].tolist()
    lcounts = batch.get(labels + "_count")
    if lcounts is not None and lcounts.tolist() != counts:
        i = next(i for i, (a, b) in enumerate(zip(counts, lcounts.tolist())) if a != b)
        raise _bad(f"detection_targets: image {i} of the batch has {counts[i]} boxes but "
                   f"{int(lcounts[i])} labels, so which label is whose box is unknown: labels "
                   "packed as their own int_list field (--field with --jsonl/--csv) are not "
                   "attached to the boxes, and a crop (augment, size) that drops boxes keeps all "
                   "of them (packdata --coco attaches them)")
    m = batch.get(mask) if mask else None
    out = []
    for i, n in enumerate(counts):
        d = {"boxes": bx[i, :n].to(torch.float32),
             "labels": lb[i, :n].to(torch.int64) + int(label_offset)}
        if m is not None:
            mi = m[i]
            if mi.dim() == 3:  # [H, W, 1]
                mi = mi[..., 0]
            present = [int(v) for v in torch.unique(mi).tolist() if v != 0]
            d["masks"] = (torch.stack([(mi == v) for v in present]).to(torch.uint8) if present
                          else torch.zeros((0,) + tuple(mi.shape), dtype=torch.uint8, device=mi.device))
            d["mask_labels"] = torch.tensor([v - 1 + int(label_offset) for v in present],
                                            dtype=torch.int64, device=mi.device)
        out.append(d)
    return out


def _make_dataset_class():
    torch = _torch()

    class Dataset(torch.utils.data.IterableDataset):
        """A fastload dataset for a torch.utils.data.DataLoader, its workers included: each worker
        opens its own loader (in the worker: nothing of the library crosses a fork) over its share
        of the epoch, so the workers together see every sample of this rank's share once.

            ds = fastload.torch.Dataset(path, batch_size=256, augment="rrc", flip=True)
            dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
            for epoch in range(epochs):
                ds.set_epoch(epoch)             # as DistributedSampler.set_epoch
                for images, labels in dl: ...

        The items are whole batches (so batch_size=None in the DataLoader): (images, labels) CPU
        tensors as fastload.torch.Loader(device="cpu") makes them (dtype, layout, mean, std,
        batch_transform as there). An epoch is the batches of fastload.torch.Loader for this
        rank (same options; with drop_last=False and world > 1 without DistributedSampler's
        padding, see below): the DataLoader's W workers each read a contiguous run of them (the
        runs' lengths differ by one at most; a worker with none opens no loader), so the batches
        are the same whatever num_workers, and len(ds) — hence len(DataLoader(ds,
        batch_size=None, num_workers=W)) — is their number for every W. With drop_last=False
        (default) rank r of R reads share r of R without padding: every record once over all
        ranks (the ranks' batch counts may differ by one), the rank's last batch short. With
        drop_last=True full batches only, the same number on every rank. `workers` (decode threads per DataLoader worker) defaults to the CPUs
        divided among the workers. The batches of a worker come in its loader's order; the
        DataLoader interleaves the workers' batches.
        fastload.torch.Loader (no DataLoader, no worker processes) is the faster drop-in where the
        DataLoader itself is not needed.
        """

        def __init__(self, path, *, batch_size: int = 256, rank: Optional[int] = None,
                     world: Optional[int] = None, **kwargs: Any):
            super().__init__()
            for k in ("device", "loader_device", "start_epoch", "start_batch"):
                if k in kwargs:
                    raise _bad(f"Dataset: {k}= is not an option here (CPU tensors; the epoch is "
                               "set with set_epoch)")
            self.path = _loader._path(path)
            self.batch_size = int(batch_size)
            self.rank, self.world = rank_world(rank, world)
            self.kwargs = kwargs
            self._len: Optional[int] = None  # batches per epoch, once counted
            # The epoch in shared memory: DataLoader workers hold copies of this object, and with
            # persistent_workers=True they keep them across epochs, so set_epoch on the main
            # process's copy would never reach them (every epoch the same order, silently).
            # Workers get the cell itself (inherited through fork, passed while spawning).
            self._epoch_cell = multiprocessing.RawValue(ctypes.c_int64, 0)

        @property
        def epoch(self) -> int:
            """The epoch the next iteration reads (set_epoch)."""
            return int(self._epoch_cell.value)

        def set_epoch(self, epoch: int) -> None:
            """The epoch the next iteration reads (its order and augmentation draws), also in
            DataLoader workers already started (persistent_workers=True)."""
            self._epoch_cell.value = _loader._count("epoch", epoch, _loader._MAX_EPOCH)

        def __getstate__(self):
            state = self.__dict__.copy()
            if multiprocessing.context.get_spawning_popen() is None:
                # a pickle or copy outside of starting a worker: a cell of its own
                state["_epoch_cell"] = int(self._epoch_cell.value)
            return state

        def __setstate__(self, state):
            cell = state["_epoch_cell"]
            if isinstance(cell, int):
                state["_epoch_cell"] = multiprocessing.RawValue(ctypes.c_int64, cell)
            self.__dict__.update(state)

        def __len__(self) -> int:
            """Batches an epoch yields over all DataLoader workers, whatever their number:
            len(fastload.torch.Loader(path, ...)) of this rank with these options (drop_last
            honoured). The first call reads the data set's shard indexes for its record count."""
            if self._len is None:
                kw = self.kwargs
                order = kw.get("order")
                if order is None:
                    order = _loader.default_order(kw.get("augment", "none"), kw.get("flip", False))
                _loader._choice("order", order, _loader._native.ORDER)
                drop_last = _loader._flag("drop_last", kw.get("drop_last", False))
                self._len = _loader._epoch_batches(
                    self.path, _loader._dataset_records(self.path), self.batch_size, self.rank,
                    self.world, drop_last, order, exact=not drop_last)
            return self._len

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            nw, wid = (info.num_workers, info.id) if info is not None else (1, 0)
            n = len(self)
            first, end = n * wid // nw, n * (wid + 1) // nw  # this worker's run of batches
            if first == end:
                return
            kw = dict(self.kwargs)
            if not kw.get("workers"):
                kw["workers"] = max(1, (os.cpu_count() or 1) // nw)
            drop_last = _loader._flag("drop_last", kw.pop("drop_last", False))
            L = Loader(self.path, batch_size=self.batch_size, rank=self.rank, world=self.world,
                       drop_last=drop_last, device="cpu", start_epoch=self.epoch,
                       start_batch=first, _exact_shares=not drop_last,
                       _max_batches=end - first, **kw)
            try:
                left = end - first
                for out in L:
                    if info is not None and isinstance(out, tuple):
                        # sent to the main process: tensors of their own, not ring slots
                        out = tuple(t.clone() if _over_ring(t) else t for t in out)
                    yield out
                    left -= 1
                    if not left:
                        break
            finally:
                L.close()

        def __repr__(self):
            return (f"fastload.torch.Dataset({self.path!r}, batch_size={self.batch_size}, "
                    f"epoch={self.epoch}, rank={self.rank}, world={self.world})")

    def _over_ring(t):
        # uint8 CPU tensors are views of the loader's ring (dtype=None); converted ones are not
        return isinstance(t, torch.Tensor) and t.dtype == torch.uint8

    Dataset.__qualname__ = "Dataset"  # pickled by reference (spawn workers): fastload.torch.Dataset
    return Dataset


_DATASET = None


def __getattr__(name):
    # Dataset subclasses torch's IterableDataset: made on first use, so that importing this
    # module does not import torch
    global _DATASET
    if name == "Dataset":
        if _DATASET is None:
            _DATASET = _make_dataset_class()
        return _DATASET
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
