#!/usr/bin/python3
"""pytorch_train.py — a PyTorch training loop fed by fastload.torch or by torch.utils.data.DataLoader.

  /usr/bin/python3 examples/pytorch_train.py PACKED_DIR                     # fastload.torch
  /usr/bin/python3 examples/pytorch_train.py PACKED_DIR --loader torch --image-folder IMAGE_DIR
  torchrun --nproc_per_node 2 examples/pytorch_train.py PACKED_DIR          # DDP, one process per GPU
  (Debian's python3-torch has no torchrun script: /usr/bin/python3 -m torch.distributed.run ...)

The defaults depend on the device (see --help): on a CPU the small CNN at the dataset's own size
(e.g. 28 px Fashion-MNIST: seconds per epoch), on CUDA resnet18 (--model resnet50) at 224 px with
AMP bf16 and channels_last. Progress (images/s, loss, data-wait fraction = time the loop waited for
the next batch / wall time) is printed every --print-every batches or --print-seconds seconds.

--loader fastload: PACKED_DIR made once by `packdata pack IMAGE_DIR PACKED_DIR` (JPEGs kept as they
are); fastload.torch.Loader reads, decodes, random-resized-crops and flips in C threads and hands over
normalized (bf16 under AMP) batches on the device. --loader torch: torchvision ImageFolder over the
original JPEGs with the same RandomResizedCrop + flip in num_workers = all cores, pin_memory=True,
uint8 batches copied non_blocking and normalized on the device, as fastload's are: the two differ
only in who reads, decodes and augments, so their images/s and data wait compare.

Under DDP (WORLD_SIZE set) --batch is per process; fastload.torch takes rank/world from
torch.distributed, the torch loader uses a DistributedSampler. --checkpoint saves model, optimizer
and the loader's position (mid-epoch exact for fastload; for the torch loader the sample order is
continued, its random crops are not) after every epoch and when --max-steps stops the run; a run
started with an existing checkpoint resumes from it. Run from the source tree (the python/ folder
is put on sys.path) or with the package installed.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fastload  # noqa: E402

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# ---- models ---------------------------------------------------------------------------------
def small_cnn(num_classes):
    """A few conv layers: enough to see the loss fall on a CPU in seconds."""
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True), nn.MaxPool2d(2))
    return nn.Sequential(block(3, 32), block(32, 64), block(64, 128),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, num_classes))


def make_model(name, num_classes):
    if name == "small":
        return small_cnn(num_classes)
    import torchvision
    return getattr(torchvision.models, name)(num_classes=num_classes)


# ---- loaders --------------------------------------------------------------------------------
def fastload_loader(path, args, device, dtype, train=True):
    """fastload.torch.Loader: (images, labels) on `device`, normalized, `dtype`, NCHW/channels_last."""
    import fastload.torch as ft
    kw = dict(batch_size=args.batch, size=args.size or None, workers=args.workers, device=device,
              dtype=dtype, layout="channels_last" if args.channels_last else "nchw",
              mean=IMAGENET_MEAN, std=IMAGENET_STD, channels=3)  # the models are RGB: gray is expanded
    if train:
        return ft.Loader(path, augment="rrc" if args.size else "none", flip=True, order="random",
                         seed=args.seed, drop_last=True, **kw)
    # evaluation: every sample once on one process (drop_last=False: the last batch is short)
    return ft.Loader(path, augment="center" if args.size else "none", order="seq", drop_last=False,
                     rank=0, world=1, **kw)


class _Order(torch.utils.data.Sampler):
    """The sample order of the current epoch (a list TorchLoader refills before each epoch)."""

    def __init__(self, order):
        self.order = order

    def __iter__(self):
        return iter(list(self.order))

    def __len__(self):
        return len(self.order)


class TorchLoader:
    """torch.utils.data.DataLoader over torchvision ImageFolder(image_folder) with the augmentation
    of --loader fastload, yielding what fastload.torch yields (normalized `dtype` on `device`).
    Workers make uint8 CHW tensors; the copy (pinned, non_blocking) and the normalization are on
    the device. state_dict()/load_state_dict() keep the position in the epoch's sample order."""

    def __init__(self, folder, args, device, dtype, rank, world):
        import torchvision
        from torchvision import transforms as T
        aug = [T.RandomResizedCrop(args.size, antialias=True)] if args.size else []
        self.ds = torchvision.datasets.ImageFolder(
            folder, transform=T.Compose(aug + [T.RandomHorizontalFlip(), T.PILToTensor()]))
        self.class_names = self.ds.classes
        self.sampler = torch.utils.data.distributed.DistributedSampler(
            self.ds, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=True)
        self.batch, self.workers = args.batch, args.workers or os.cpu_count()
        self.device, self.dtype, self.channels_last = device, dtype, args.channels_last
        self.epoch, self.pos, self.order, self.dl = 0, 0, [], None
        self.mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)

    def __len__(self):
        return len(self.sampler) // self.batch

    def set_epoch(self, epoch):
        if epoch != self.epoch:
            self.epoch, self.pos = epoch, 0

    def state_dict(self):
        return {"epoch": self.epoch, "batch": self.pos}

    def load_state_dict(self, s):
        self.epoch, self.pos = int(s["epoch"]), int(s["batch"])

    def __iter__(self):
        self.sampler.set_epoch(self.epoch)
        self.order[:] = list(self.sampler)[self.pos * self.batch:len(self) * self.batch]
        if self.dl is None:  # one DataLoader: its workers persist across epochs, the order is per epoch
            self.dl = torch.utils.data.DataLoader(
                self.ds, batch_size=self.batch, sampler=_Order(self.order), drop_last=True,
                num_workers=self.workers, pin_memory=self.device.type == "cuda",
                persistent_workers=self.workers > 0)
        dl = self.dl
        nb = self.device.type == "cuda"
        mf = torch.channels_last if self.channels_last else torch.contiguous_format
        for x, y in dl:
            x = x.to(self.device, non_blocking=nb).to(self.dtype).div_(255)
            x = x.sub_(self.mean.to(self.dtype)).div_(self.std.to(self.dtype)).contiguous(memory_format=mf)
            self.pos += 1
            yield x, y.to(self.device, non_blocking=nb)
        self.epoch, self.pos = self.epoch + 1, 0

    def close(self):
        self.dl = None  # (persistent workers end with the DataLoader)


class GpuUtil:
    """Mean GPU utilisation (NVML's %, sampled every 0.5 s by nvidia-smi, else torch.cuda.utilization
    through pynvml) between start() and stop(); None when neither is available."""

    def __init__(self, device):
        import threading
        self.idx, self.samples, self.done = device.index or 0, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        import shutil
        import subprocess
        if shutil.which("nvidia-smi"):
            r = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                "-i", str(self.idx)], capture_output=True, text=True, timeout=5)
            return float(r.stdout.split()[0])
        return float(torch.cuda.utilization(self.idx))

    def _run(self):
        while not self.done.wait(0.5):
            try:
                self.samples.append(self._sample())
            except Exception:
                return

    def start(self):
        if not self.thread.is_alive():
            self.thread.start()

    def stop(self):
        self.done.set()
        if self.thread.is_alive():
            self.thread.join(6)
        return round(sum(self.samples) / len(self.samples), 1) if self.samples else None


def dataset_info(path):
    """(class names, sample count) of a packed dataset."""
    with fastload.Loader(path, batch_size=1, workers=1, size=8, augment="center") as info:
        return info.class_names, info.dataset_size


def evaluate(model, path, args, device, dtype, amp):
    correct = seen = 0
    with fastload_loader(path, args, device, dtype, train=False) as L:
        n_total = dataset_info(path)[1]
        model.eval()
        with torch.no_grad(), amp:
            for x, y in L:
                take = min(len(y), n_total - seen)
                if take <= 0:
                    break
                correct += (model(x[:take]).argmax(1) == y[:take]).sum().item()
                seen += take
        model.train()
    return correct / max(seen, 1)


# ---- arguments ------------------------------------------------------------------------------
def parse_args(argv=None):
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    dev = pre.parse_known_args(argv)[0].device
    cuda = dev.startswith("cuda")
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog=f"Defaults shown are for device {dev!r} (chosen by --device: CUDA when available).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("train", help="packed training set (packdata pack IMAGE_DIR DIR)")
    ap.add_argument("--device", default=dev, help="cuda or cpu; under DDP cuda:LOCAL_RANK")
    ap.add_argument("--loader", choices=("fastload", "torch"), default="fastload",
                    help="fastload.torch, or torch.utils.data.DataLoader over --image-folder")
    ap.add_argument("--image-folder", help="the original images (class sub-folders) for --loader torch")
    ap.add_argument("--val", help="packed validation set, evaluated after every epoch (fastload)")
    ap.add_argument("--model", default="resnet18" if cuda else "small",
                    help="small, or a torchvision model name (resnet18, resnet50, ...)")
    ap.add_argument("--size", type=int, default=224 if cuda else 0,
                    help="output side in pixels (random-resized-crop); 0: the dataset's own size, no crop")
    ap.add_argument("--epochs", type=int, default=10 if cuda else 2, help="passes over the training set")
    ap.add_argument("--batch", type=int, default=256 if cuda else 128, help="per process")
    ap.add_argument("--workers", type=int, default=0, help="decode threads / DataLoader workers (0: all CPUs)")
    ap.add_argument("--amp", choices=("bf16", "fp16", "none"), default="bf16" if cuda else "none",
                    help="autocast precision")
    ap.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=cuda,
                    help="NHWC memory format for the model")
    ap.add_argument("--lr", type=float, default=0.1, help="SGD learning rate (momentum 0.9, constant)")
    ap.add_argument("--seed", type=int, default=0, help="shuffling, augmentation and initial weights")
    ap.add_argument("--checkpoint", help="save here after every epoch and at --max-steps; resume from it when present")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N steps in this run (0: no limit)")
    ap.add_argument("--print-every", type=int, default=0, help="progress every N batches (0: by --print-seconds)")
    ap.add_argument("--print-seconds", type=float, default=5.0, help="progress at least this often in an epoch")
    ap.add_argument("--warmup-steps", type=int, default=0,
                    help="steps left out of the --json figures (cuDNN autotuning, workers starting)")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON line at the end: images/s, data-wait fraction, GPU utilisation")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if ddp:
        dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
        if args.device.startswith("cuda"):
            args.device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    say = print if rank == 0 else (lambda *a, **k: None)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    in_dtype = amp_dtype if amp_dtype is not None and device.type == "cuda" else torch.float32
    amp = torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None)

    if args.loader == "fastload":
        loader = fastload_loader(args.train, args, device, in_dtype)
        class_names = dataset_info(args.train)[0]
    else:
        if not args.image_folder:
            sys.exit("--loader torch needs --image-folder (the images the packed set was made from)")
        loader = TorchLoader(args.image_folder, args, device, in_dtype, rank, world)
        class_names = loader.class_names
    num_classes = len(class_names) or 1000
    model = make_model(args.model, num_classes).to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-5)
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp == "fp16" and device.type == "cuda")
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    step, start_epoch, start_batch, resumed = 0, 0, 0, False
    if args.checkpoint and os.path.exists(args.checkpoint):
        ck = torch.load(args.checkpoint, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        loader.load_state_dict(ck["loader"])  # continues at the exact next batch
        step, start_epoch, start_batch, resumed = ck["step"], ck["loader"]["epoch"], ck["loader"]["batch"], True
        say(f"resumed from {args.checkpoint} at epoch {start_epoch} batch {ck['loader']['batch']} (step {step})")
    train_model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda"
                                                      else None) if ddp else model
    say(f"{args.loader} loader, {args.model} at {args.size or 'dataset size'} px, batch {args.batch} x {world} "
        f"process(es), {len(loader)} batches/epoch, device {device}, amp {args.amp}, channels_last "
        f"{args.channels_last}")

    def save():
        if args.checkpoint and rank == 0:
            tmp = args.checkpoint + ".tmp"
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "loader": loader.state_dict(), "step": step, "args": vars(args)}, tmp)
            os.replace(tmp, args.checkpoint)  # a killed save never leaves a half checkpoint

    run_steps, stop = 0, False
    meas = {"t0": time.perf_counter(), "images": 0, "wait": 0.0}  # the --json figures, after warm-up
    gpu = GpuUtil(device) if args.json and device.type == "cuda" else None
    if gpu and not args.warmup_steps:
        gpu.start()
    for epoch in range(start_epoch, args.epochs):
        if not (resumed and epoch == start_epoch):
            loader.set_epoch(epoch)  # (a resumed epoch keeps the checkpoint's position)
        t0 = t_last = time.perf_counter()
        n = n_last = wait = wait_last = 0
        b = b_last = start_batch if resumed and epoch == start_epoch else 0  # batches done in the epoch
        loss_acc = torch.zeros((), device=device)  # summed on the device: no sync per step
        loss_epoch = torch.zeros((), device=device)
        it = iter(loader)
        while True:
            tw = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            dw = time.perf_counter() - tw
            wait += dw
            meas["wait"] += dw
            with amp:
                loss = loss_fn(train_model(x), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            loss_acc += loss.detach().float()
            loss_epoch += loss.detach().float()
            n += len(y)
            b += 1
            step += 1
            run_steps += 1
            meas["images"] += len(y)
            if run_steps == args.warmup_steps:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                meas = {"t0": time.perf_counter(), "images": 0, "wait": 0.0}
                if gpu:
                    gpu.start()
            stop = bool(args.max_steps) and run_steps >= args.max_steps
            now = time.perf_counter()
            if stop or (args.print_every and b % args.print_every == 0) or \
                    (not args.print_every and now - t_last >= args.print_seconds):
                lsum = loss_acc.item()  # syncs: the interval's time is the device's too
                now = time.perf_counter()
                dt = max(now - t_last, 1e-9)
                say(f"  epoch {epoch} batch {b}/{len(loader)}: {(n - n_last) * world / dt:,.0f} img/s, "
                    f"loss {lsum / (b - b_last):.4f}, data wait {100 * (wait - wait_last) / dt:.1f}%", flush=True)
                t_last, n_last, wait_last, b_last = now, n, wait, b
                loss_acc.zero_()
            if stop:
                break
        if device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        say(f"epoch {epoch}: loss {loss_epoch.item() / max(n // args.batch, 1):.4f}, {n // args.batch} batches, {n * world / dt:,.0f} img/s, data wait {100 * wait / dt:.1f}% "
            f"of {dt:.1f} s", flush=True)
        if stop:
            del it  # (the generator's position is the loader's state)
        save()
        if args.val and rank == 0 and not stop:
            say(f"  val top-1: {evaluate(model, args.val, args, device, in_dtype, amp):.4f}")
        if stop:
            break
    if device.type == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - meas["t0"]
    if args.json and rank == 0:
        import json
        print(json.dumps({"loader": args.loader, "model": args.model, "size": args.size, "batch": args.batch,
                          "world": world, "amp": args.amp, "channels_last": args.channels_last,
                          "steps": run_steps, "measured_steps": max(run_steps - args.warmup_steps, 0),
                          "images_per_sec": round(meas["images"] * world / dt, 1) if meas["images"] else None,
                          "data_wait_fraction": round(meas["wait"] / dt, 4) if meas["images"] else None,
                          "gpu_util": gpu.stop() if gpu else None,
                          "torch": torch.__version__}), flush=True)
    loader.close()
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        # Ctrl-C: one line, no traceback; the last --checkpoint save is complete (written to .tmp, renamed)
        a = sys.argv[1:]
        ck = a[a.index("--checkpoint") + 1] if "--checkpoint" in a[:-1] else None
        print("pytorch_train.py: interrupted" + (f"; run the same command to resume from {ck}" if ck else
              " (no --checkpoint: progress not kept)"), file=sys.stderr)
        sys.exit(130)
