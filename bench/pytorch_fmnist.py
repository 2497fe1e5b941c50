#!/usr/bin/env python3
"""pytorch_fmnist.py — the PyTorch reference for trainfast's GPU figure: the same fastcnn model
(3 × [conv3x3 no bias → maxpool2 → BN → ReLU], widths w, 2w, 4w; global average pool; linear),
the same optimizer (SGD, Nesterov 0.9, weight decay on conv/linear weights only), label smoothing,
linear warm-up then linear decay, random crop with zero padding + flip, trained with AMP bf16
autocast and channels_last — PyTorch's recommended fast eager recipe — with the whole dataset on
the GPU (so PyTorch never waits for data). Prints images/s of the training steps and test top-1.

CPU mode (--device cpu, bench/trainer_cpu.sh): fp32, torch.set_num_threads(--threads, default all
cores; oneDNN underneath), the dataset preloaded in RAM as uint8, NCHW (--memory-format); images/s
over all epochs (as trainfast's images_per_sec: the training steps including augmentation, not
the evaluation) and cores used ((user+sys CPU time)/wall of the training). --model resnet18 is
trainfast's resnet18 layer for layer (torchvision's: 7x7/2 stem + BN + ReLU, 3x3/2 max pool, 4
stages of 2 basic blocks with 1x1 BN downsample, global average pool, linear); --no-eval skips
the test set (images/s only).

Recipe as trainfast's (trainer/train/train_loop.c, epoch_budget.h): full batches only (an epoch's last
partial batch is dropped), linear warm-up of int(warmup x steps per epoch) steps but at least
min(50, total/4), then linear decay to 0; init U(+-1/sqrt(fan_in)) is PyTorch's default and
trainfast's; BN eps 1e-5, momentum 0.1 in both.

Data, in order of preference: a packed fastload dataset (--data/--val, read once through the
fastload Python binding), IDX files (--idx DIR), else synthetic data (images/s only; says so).

Usage: pytorch_fmnist.py --data samples/fashion-mnist/packed/train --val samples/fashion-mnist/packed/test \
           --epochs 16 --batch 512 --width 64 [--json]
The last stdout line with --json is one JSON object (images_per_sec, val_top1, ...).
"""
import argparse
import gzip
import json
import os
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="packed training set (fastload)")
    ap.add_argument("--val", help="packed test set (fastload)")
    ap.add_argument("--idx", help="directory with {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz")
    ap.add_argument("--epochs", type=int, default=16)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--residual", action="store_true",
                    help="fastcnn --residual: after each block, x + cba(cba(x)) (conv-BN-ReLU pairs)")
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--wd", type=float, default=5e-4)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--warmup", type=float, default=0.5, help="warm-up length in epochs")
    ap.add_argument("--crop-pad", type=int, default=2)
    ap.add_argument("--no-flip", action="store_true")
    ap.add_argument("--no-tta", action="store_true")
    ap.add_argument("--precision", choices=["bf16", "fp16", "fp32"], default=None,
                    help="default: bf16 on cuda, fp32 on cpu")
    ap.add_argument("--model", choices=["fastcnn", "resnet18"], default="fastcnn")
    ap.add_argument("--threads", type=int, default=0, help="CPU: torch.set_num_threads (default: all cores)")
    ap.add_argument("--memory-format", choices=["auto", "nchw", "channels_last"], default="auto",
                    help="auto: channels_last on cuda, NCHW on cpu")
    ap.add_argument("--no-eval", action="store_true", help="skip the test set (images/s only)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (default: eager)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (a smoke test of the script)")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N training samples")
    ap.add_argument("--json", action="store_true")
    return ap.parse_args()


def load_fastload(path):
    """Whole packed dataset as (N, H, W, C) uint8 and (N,) int64 numpy arrays, in record order."""
    import numpy as np
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(root, "python"))
    import fastload
    with fastload.Loader(path, batch_size=4096, workers=os.cpu_count() or 1, order="seq", pinned=False,
                         augment="none", flip=False, seed=0, drop_last=False) as L:
        n = L.dataset_size
        xs, ys, got = [], [], 0
        for images, labels in L.epoch():
            take = min(len(labels), n - got)
            xs.append(np.array(images[:take], copy=True))
            ys.append(np.array(labels[:take], copy=True).astype(np.int64))
            got += take
            if got >= n:
                break
    return np.concatenate(xs), np.concatenate(ys)


def load_idx(directory, prefix):
    import numpy as np

    def read(name):
        with gzip.open(os.path.join(directory, name), "rb") as f:
            return f.read()
    img = read(f"{prefix}-images-idx3-ubyte.gz")
    lab = read(f"{prefix}-labels-idx1-ubyte.gz")
    n, h, w = (int.from_bytes(img[o:o + 4], "big") for o in (4, 8, 12))
    x = np.frombuffer(img, dtype=np.uint8, offset=16).reshape(n, h, w, 1).copy()
    y = np.frombuffer(lab, dtype=np.uint8, offset=8).astype(np.int64)
    return x, y


def load_data(a):
    import numpy as np
    if a.data and a.val:
        try:
            return load_fastload(a.data), load_fastload(a.val), "fastload"
        except Exception as e:  # binding or library missing: say so and fall back
            print(f"pytorch_fmnist: fastload binding unavailable ({e}); trying IDX", file=sys.stderr)
    if a.idx and os.path.exists(os.path.join(a.idx, "train-images-idx3-ubyte.gz")):
        return load_idx(a.idx, "train"), load_idx(a.idx, "t10k"), "idx"
    print("pytorch_fmnist: no dataset found: synthetic data (images/s only, accuracy meaningless)",
          file=sys.stderr)
    rng = np.random.default_rng(0)
    tr = (rng.integers(0, 256, (60000, 28, 28, 1), dtype=np.uint8), rng.integers(0, 10, 60000))
    te = (rng.integers(0, 256, (10000, 28, 28, 1), dtype=np.uint8), rng.integers(0, 10, 10000))
    return tr, te, "synthetic"


def build_model(model, in_c, classes, width=64, residual=False):
    """trainfast's fastcnn (widths w, 2w, 4w; --residual: a residual pair after each block) or
    resnet18, layer for layer, as a torch.nn.Module (PyTorch's default init, as trainfast's).
    Also used by bench/pytorch_train_loop.py."""
    import torch.nn as nn
    import torch.nn.functional as F

    def cba(ci, co):
        return [nn.Conv2d(ci, co, 3, padding=1, bias=False), nn.BatchNorm2d(co), nn.ReLU(inplace=True)]

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.f = nn.Sequential(*cba(c, c), *cba(c, c))

        def forward(self, x):
            return x + self.f(x)

    class FastCNN(nn.Module):
        def __init__(self, w):
            super().__init__()
            layers, c = [], in_c
            for wi in (w, 2 * w, 4 * w):
                layers += [nn.Conv2d(c, wi, 3, padding=1, bias=False), nn.MaxPool2d(2),
                           nn.BatchNorm2d(wi), nn.ReLU(inplace=True)]
                if residual:
                    layers.append(Residual(wi))
                c = wi
            self.features = nn.Sequential(*layers)
            self.head = nn.Linear(c, classes)

        def forward(self, x):
            return self.head(self.features(x).mean((2, 3)))

    class Basic(nn.Module):
        """resnet18's basic block: conv3x3-BN-ReLU, conv3x3-BN, + skip (1x1 conv-BN when the
        shape changes), ReLU (trainfast models.c build_resnet)."""
        def __init__(self, ci, co, stride):
            super().__init__()
            self.f = nn.Sequential(nn.Conv2d(ci, co, 3, stride, 1, bias=False), nn.BatchNorm2d(co),
                                   nn.ReLU(inplace=True), nn.Conv2d(co, co, 3, 1, 1, bias=False),
                                   nn.BatchNorm2d(co))
            self.down = None if stride == 1 and ci == co else nn.Sequential(
                nn.Conv2d(ci, co, 1, stride, 0, bias=False), nn.BatchNorm2d(co))

        def forward(self, x):
            return F.relu(self.f(x) + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [nn.Conv2d(in_c, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                      nn.MaxPool2d(3, 2, 1)]
            c = 64
            for stage in range(4):
                w = 64 << stage
                for i in range(2):
                    layers.append(Basic(c, w, 2 if stage > 0 and i == 0 else 1))
                    c = w
            self.features = nn.Sequential(*layers)
            self.head = nn.Linear(c, classes)

        def forward(self, x):
            return self.head(self.features(x).mean((2, 3)))

    return FastCNN(width) if model == "fastcnn" else ResNet18()


def sgd(model, lr, wd, momentum):
    """trainfast's optimizer: SGD with Nesterov momentum, weight decay on conv/linear weights only."""
    import torch
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    return torch.optim.SGD([{"params": decay, "weight_decay": wd},
                            {"params": no_decay, "weight_decay": 0.0}],
                           lr=lr, momentum=momentum, nesterov=True)


def lr_schedule(lr, warmup_epochs, steps_per_epoch, epochs):
    """trainfast's schedule over steps: linear warm-up of int(warmup x steps per epoch) steps but
    at least min(50, total/4) (tf_warmup_steps), then linear decay to 0. Returns lr_at(step)."""
    total = steps_per_epoch * epochs
    warm = int(warmup_epochs * steps_per_epoch)
    warm = max(warm, min(50, total // 4)) if warmup_epochs > 0 else 0
    warm = min(warm, total)

    def lr_at(step):
        if step < warm:
            return lr * (step + 1) / warm
        if total <= warm:
            return lr
        return lr * max(0.0, (total - step) / max(1, total - warm))
    return lr_at


def main():
    a = parse_args()
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    if a.device == "cuda" and not torch.cuda.is_available():
        print("SKIP pytorch_fmnist: no GPU (torch.cuda.is_available() is False)")
        return 77
    if a.precision is None:
        a.precision = "bf16" if a.device == "cuda" else "fp32"
    if a.device == "cpu":
        torch.set_num_threads(a.threads or os.cpu_count() or 1)
    mf = {"auto": torch.channels_last if a.device == "cuda" else torch.contiguous_format,
          "nchw": torch.contiguous_format, "channels_last": torch.channels_last}[a.memory_format]
    torch.manual_seed(a.seed)
    torch.backends.cudnn.benchmark = True
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()
    (xtr, ytr), (xte, yte), source = load_data(a)
    if a.limit:
        xtr, ytr = xtr[:a.limit], ytr[:a.limit]
    classes = int(max(ytr.max(), yte.max())) + 1
    in_c = xtr.shape[3]
    Xtr = torch.from_numpy(np.ascontiguousarray(xtr)).to(dev)  # (N, H, W, C) uint8, stays uint8
    Ytr = torch.from_numpy(ytr).to(dev)
    Xte = torch.from_numpy(np.ascontiguousarray(xte)).to(dev)
    Yte = torch.from_numpy(yte).to(dev)
    N, H, W, C = Xtr.shape
    mean, std = 0.5, 0.25  # trainfast's fastcnn defaults

    model = build_model(a.model, in_c, classes, a.width, a.residual).to(dev).to(memory_format=mf)
    opt = sgd(model, a.lr, a.wd, a.momentum)
    crit = nn.CrossEntropyLoss(label_smoothing=a.label_smoothing)
    run = torch.compile(model) if a.compile else model
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[a.precision]
    try:
        scaler = torch.amp.GradScaler("cuda", enabled=a.precision == "fp16" and cuda)
    except (AttributeError, TypeError):  # torch < 2.3
        scaler = torch.cuda.amp.GradScaler(enabled=a.precision == "fp16" and cuda)
    steps_per_epoch = N // a.batch  # full batches only, as trainfast on one process
    lr_at = lr_schedule(a.lr, a.warmup, steps_per_epoch, a.epochs)

    p = a.crop_pad
    ar_h = torch.arange(H, device=dev)
    ar_w = torch.arange(W, device=dev)

    def augment(xb):
        """uint8 NHWC batch → normalized float NCHW (channels_last), random crop with zero padding
        and flip, all on the GPU."""
        B = xb.shape[0]
        x = xb.permute(0, 3, 1, 2)  # (B, C, H, W) view
        if p > 0:
            x = F.pad(x, (p, p, p, p))
            dy = torch.randint(0, 2 * p + 1, (B,), device=dev)
            dx = torch.randint(0, 2 * p + 1, (B,), device=dev)
            rows = (dy[:, None] + ar_h)[:, :, None]      # (B, H, 1)
            cols = (dx[:, None] + ar_w)[:, None, :]      # (B, 1, W)
            bidx = torch.arange(B, device=dev)[:, None, None]
            x = x[bidx, :, rows, cols].permute(0, 3, 1, 2)  # (B, H, W, C) → (B, C, H, W)
        if not a.no_flip:
            flip = torch.rand(B, device=dev) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(3), x)
        x = (x.float() * (1.0 / (255.0 * std)) - mean / std)
        return x.contiguous(memory_format=mf)

    def to_input(xb):
        x = xb.permute(0, 3, 1, 2).float() * (1.0 / (255.0 * std)) - mean / std
        return x.contiguous(memory_format=mf)

    epoch_times, step = [], 0
    model.train()
    cpu0 = os.times()
    t_all = time.perf_counter()
    for ep in range(a.epochs):
        sync()
        t0 = time.perf_counter()
        perm = torch.randperm(N, device=dev)
        for i in range(steps_per_epoch):
            idx = perm[i * a.batch:(i + 1) * a.batch]
            x, y = augment(Xtr[idx]), Ytr[idx]
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            with torch.autocast(dev.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
                loss = crit(run(x), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            step += 1
        sync()
        epoch_times.append(time.perf_counter() - t0)
    train_s = time.perf_counter() - t_all
    cpu1 = os.times()
    cores_used = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / train_s

    model.eval()
    correct, loss_sum = 0, 0.0
    if a.no_eval:
        Xte = Xte[:0]
    with torch.no_grad(), torch.autocast(dev.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None):
        for i in range(0, Xte.shape[0], 2000):
            x = to_input(Xte[i:i + 2000])
            logits = run(x).float()
            if not a.no_tta:
                logits = 0.5 * (logits + run(x.flip(3)).float())
            correct += (logits.argmax(1) == Yte[i:i + 2000]).sum().item()
            loss_sum += F.cross_entropy(logits, Yte[i:i + 2000], reduction="sum").item()
    top1 = correct / Xte.shape[0] if Xte.shape[0] else None
    steady = epoch_times[1:] if len(epoch_times) > 1 else epoch_times
    ips_steady = steps_per_epoch * a.batch * len(steady) / sum(steady)
    ips_all = steps_per_epoch * a.batch * a.epochs / train_s
    res = {"images_per_sec": ips_steady, "images_per_sec_all_epochs": ips_all, "val_top1": top1,
           "val_loss": loss_sum / Xte.shape[0] if Xte.shape[0] else None, "train_seconds": train_s, "epochs": a.epochs,
           "batch": a.batch, "width": a.width, "residual": a.residual, "precision": a.precision,
           "channels_last": mf == torch.channels_last, "compile": a.compile, "model": a.model,
           "threads": torch.get_num_threads() if not cuda else None, "cores_used": cores_used, "images": N, "data_source": source,
           "torch": torch.__version__, "device": torch.cuda.get_device_name(0) if cuda else "cpu"}
    print(f"pytorch_fmnist: {a.epochs} epochs in {train_s:.2f} s, {ips_steady:,.0f} img/s "
          f"(steady state, epochs 2+), {ips_all:,.0f} img/s over all epochs, test top-1 "
          f"{'-' if top1 is None else f'{100 * top1:.2f}%'} ({source} data, {a.precision}, "
          f"{'channels_last' if mf == torch.channels_last else 'NCHW'}, {cores_used:.2f} cores used)")
    if a.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
