#!/usr/bin/python3
"""train_segmentation.py — a small U-Net trained on a packed image + mask set through fastload.torch.

  packdata pack images train-packed --mask-dir masks          # folder pairs (VOC, ADE20K, ...)
  packdata pack val-images val-packed --mask-dir val-masks
  /usr/bin/python3 examples/train_segmentation.py train-packed --val val-packed --epochs 8

fastload.torch.Loader reads each record's image and mask (field "mask": class ids, 0 background),
random-resized-crops and flips both the same way in C threads (the image bilinear, the mask nearest:
no new class id appears) and hands over float32 N×C×H×W images beside the uint8 masks. The net is
a four-level U-Net (16-128 channels, batch norm) trained with cross-entropy (--ignore-index, 255 as
VOC's border, is left out of loss and score). After every epoch it scores the held-out set (resized
to --size, no augmentation): mean IoU over the classes that occur there or are predicted, and pixel
accuracy; before the first epoch too (random weights). At the end: mIoU after the first and after
the last epoch, and with --json one JSON line of the figures. Run from the source tree (python/ is
put on sys.path) or with the package installed.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fastload.torch as ft  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("data", help="training set: packdata pack IMAGES DST --mask-dir MASKS (fields image, mask)")
    ap.add_argument("--val", required=True, help="held-out set packed the same way")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=128, help="images and masks are SIZE x SIZE")
    ap.add_argument("--scale", type=float, nargs=2, default=(0.3, 1.0),
                    help="random-resized crop: the crop's share of the image")
    ap.add_argument("--num-classes", type=int, default=0,
                    help="classes including the background (0: the largest id in the masks + 1)")
    ap.add_argument("--ignore-index", type=int, default=255, help="mask value left out of loss and score")
    ap.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (cosine to 0)")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: all epochs)")
    ap.add_argument("--workers", type=int, default=2, help="fastload decode threads")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (on a busy 2-core machine, 2 threads wait for each other at "
                         "every barrier: 5x the CPU time per step)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")
    return ap.parse_args(argv)


class UNet(nn.Module):
    """Encoder 16-32-64-128 (two 3x3 conv + BN + ReLU per level, max-pool between), decoder with
    skip connections and transposed-conv upsampling, a 1x1 classifier."""

    def __init__(self, classes, width=16):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                                 nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                                 nn.BatchNorm2d(cout), nn.ReLU(inplace=True))
        c = [width, width * 2, width * 4, width * 8]
        self.down = nn.ModuleList([block(3, c[0]), block(c[0], c[1]), block(c[1], c[2]), block(c[2], c[3])])
        self.up = nn.ModuleList([nn.ConvTranspose2d(c[i + 1], c[i], 2, stride=2) for i in range(3)])
        self.dec = nn.ModuleList([block(2 * c[i], c[i]) for i in range(3)])
        self.head = nn.Conv2d(c[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for i in (2, 1, 0):
            x = self.dec[i](torch.cat([skips[i], self.up[i](x)], 1))
        return self.head(x)


def masks_of(b):
    m = b["mask"]
    return (m[..., 0] if m.dim() == 4 else m).long()


def count_classes(path, size, ignore):
    """The largest class id in a set's masks + 1 (one pass, no augmentation, small size)."""
    top = 0
    with ft.Loader(path, batch_size=64, size=size) as L:
        for b in L:
            m = masks_of(b)
            m = m[m != ignore]
            if m.numel():
                top = max(top, int(m.max()))
    return top + 1


def evaluate(model, path, size, classes, ignore, workers):
    """(mIoU, pixel accuracy) over the held-out set."""
    conf = torch.zeros(classes, classes, dtype=torch.int64)
    model.eval()
    with torch.no_grad(), ft.Loader(path, batch_size=32, size=size, dtype="float32",
                                    workers=workers) as L:
        for b in L:
            t = masks_of(b)
            p = model(b["image"]).argmax(1)
            keep = t != ignore
            conf += torch.bincount(t[keep] * classes + p[keep], minlength=classes * classes).view(classes, classes)
    model.train()
    inter = conf.diag().double()
    union = conf.sum(0).double() + conf.sum(1).double() - inter
    seen = union > 0
    miou = (inter[seen] / union[seen]).mean().item()
    return miou, (inter.sum() / conf.sum().clamp(min=1)).item()


def main(argv=None):
    a = parse_args(argv)
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    K = a.num_classes or max(count_classes(a.data, 64, a.ignore_index),
                             count_classes(a.val, 64, a.ignore_index))
    loader = ft.Loader(a.data, batch_size=a.batch, size=a.size, augment="rrc", flip=True,
                       scale=tuple(a.scale), seed=a.seed, workers=a.workers, drop_last=True,
                       dtype="float32")
    model = UNet(K)
    steps = a.epochs * len(loader)
    if a.max_steps:
        steps = min(steps, a.max_steps)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    lossf = nn.CrossEntropyLoss(ignore_index=a.ignore_index)
    print(f"train_segmentation: {a.data}: {len(loader.dataset)} images, {K} classes (with background); "
          f"val {a.val}; U-Net at {a.size} px, batch {a.batch}, {len(loader)} steps an epoch, "
          f"{steps} steps", flush=True)
    miou0, acc0 = evaluate(model, a.val, a.size, K, a.ignore_index, a.workers)
    print(f"before training: val mIoU {miou0:.4f}, pixel accuracy {acc0:.4f}", flush=True)
    history, step, wait = [], 0, 0.0
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        loader.set_epoch(epoch)
        te, total, n = time.perf_counter(), 0.0, 0
        it = iter(loader)
        while step < steps:
            w0 = time.perf_counter()
            b = next(it, None)
            wait += time.perf_counter() - w0
            if b is None:
                break
            loss = lossf(model(b["image"]), masks_of(b))
            if not math.isfinite(loss.item()):
                sys.exit(f"train_segmentation: step {step}: loss {loss.item()} is not finite")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total, n, step = total + loss.item(), n + 1, step + 1
        miou, acc = evaluate(model, a.val, a.size, K, a.ignore_index, a.workers)
        history.append({"epoch": epoch + 1, "loss": total / max(1, n), "miou": miou, "acc": acc})
        print(f"epoch {epoch + 1}/{a.epochs}: train loss {total / max(1, n):.4f} ({n} steps, "
              f"{n * a.batch / (time.perf_counter() - te):.1f} img/s); val mIoU {miou:.4f}, "
              f"pixel accuracy {acc:.4f}", flush=True)
        if step >= steps:
            break
    wall = time.perf_counter() - t0
    loader.close()
    first, last = history[0], history[-1]
    print(f"mIoU: after epoch {first['epoch']} {first['miou']:.4f} -> after epoch {last['epoch']} "
          f"{last['miou']:.4f} (before training {miou0:.4f}); loss {first['loss']:.4f} -> "
          f"{last['loss']:.4f}; {step} steps, {wall:.1f} s, data wait {100 * wait / wall:.1f}%")
    if a.json:
        print(json.dumps({"steps": step, "epochs": len(history), "miou_before": miou0,
                          "miou_first": first["miou"], "miou_last": last["miou"], "loss_first": first["loss"],
                          "loss_last": last["loss"], "wall_s": wall, "data_wait": wait / wall}))
    return history


if __name__ == "__main__":
    main()
