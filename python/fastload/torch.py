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
import os

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


def _bad(msg):
    return InvalidOptionError(FL_E_INVALID, "fastload.torch: " + msg)


def rank_world(rank=None, world=None):
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

    def __call__(self, b):
        t = self.torch
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


class _CudaArray:
    """__cuda_array_interface__ (v2) over the loader's device buffer; holds the batch (its slot)."""

    def __init__(self, ptr, shape, typestr, batch):
        self.batch = batch
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (int(ptr), False), "version": 2}


class Loader:
    """A fastload dataset as an iterable of (images, labels) torch tensors, one epoch per pass.

    Loader(path, batch_size=256, *, size=None, augment="none", flip=False, order="random",
           seed=0, workers=0, drop_last=True, device="cpu", dtype=None, layout="nchw",
           mean=None, std=None, rank=None, world=None, loader_device="auto", **loader_kwargs)

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
    loader_kwargs  passed to fastload.Loader (io, prefetch, decode, on_corrupt, scale, ratio...)

    labels are int64 tensors on `device`. len() is the batches per epoch. Iterating yields the
    batches left in the current epoch. set_epoch(e) moves to the start of epoch e unless the loader
    is already inside epoch e (so a state loaded mid-epoch survives the usual set_epoch call
    before the epoch's loop). state_dict() / load_state_dict() resume exactly, also mid-epoch.
    Errors are fastload.errors classes, unchanged. One consumer thread, as fastload.Loader.
    """

    def __init__(self, path, batch_size=256, *, size=None, augment="none", flip=False,
                 order="random", seed=0, workers=0, drop_last=True, device="cpu", dtype=None,
                 layout="nchw", mean=None, std=None, rank=None, world=None, loader_device="auto",
                 **loader_kwargs):
        torch = _torch()
        rank, world = rank_world(rank, world)
        dev = torch.device(device)
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        if loader_device not in ("auto", True, False):
            raise _bad(f"loader_device={loader_device!r}: expected 'auto', True or False")
        kw = dict(batch_size=batch_size, size=size, augment=augment, flip=flip, order=order,
                  seed=seed, workers=workers, drop_last=drop_last, rank=rank, world=world,
                  **loader_kwargs)
        use_dev = False
        self._loader = None
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
        try:  # mean / std are checked against the channels at the first batch
            self._feed = _Feeder(dev, dtype, layout, mean, std, loader_device=use_dev)
        except Exception:
            self._loader.close()
            raise

    @property
    def loader(self):
        """The underlying fastload.Loader."""
        return self._loader

    @property
    def device(self):
        return self._feed.device

    @property
    def batch_size(self):
        return self._loader.batch_size

    def __len__(self):
        return len(self._loader)

    def __iter__(self):
        L = self._loader
        e = L.position()[0]
        while L.position()[0] == e:
            self._feed.make_room()
            b = L.next_batch()
            last = b.last_in_epoch
            out = self._feed(b)
            del b
            yield out
            if last:
                break

    def set_epoch(self, epoch):
        """Go to the start of `epoch`, unless the loader is already inside it."""
        e = _loader._count("epoch", epoch, _loader._MAX_EPOCH)
        if self._loader.position()[0] != e:
            self._feed.close()
            self._loader.load_state_dict({"epoch": e, "batch": 0})

    def state_dict(self):
        """{'epoch', 'batch', 'seed'} of the next batch: pass to load_state_dict to continue."""
        return self._loader.state_dict()

    def load_state_dict(self, state):
        self._feed.close()
        self._loader.load_state_dict(state)

    def close(self):
        """Stop the loader. Tensors handed out stay valid (CPU uint8 ones keep their slot)."""
        if self._loader is not None:
            self._feed.close()
            self._loader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return (f"fastload.torch.Loader({self._loader.path!r}, batch_size={self.batch_size}, "
                f"device={str(self.device)!r}, rank={self.rank}, world={self.world})")
