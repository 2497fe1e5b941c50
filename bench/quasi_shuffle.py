#!/usr/bin/env python3
"""quasi_shuffle.py — what the quasi-random order costs in accuracy: a
fastcnn-shaped CNN (3 x [conv3x3 -> maxpool2 -> BN -> ReLU], widths w, 2w, 4w; global average
pool; linear; SGD Nesterov 0.9, linear decay) trained for --epochs on Fashion-MNIST whose 60,000
training images are SORTED BY CLASS (the worst case: what packdata makes of an ImageFolder tree),
fed in the order libfastload gives: --order seq, random, quasi (block 64 x window 32, the
defaults). The order is taken from the library itself: a loader over a stand-in data set of
60,000 records (tests/trainer/tf_make_dataset) yields each batch's record indices, which index
the class-sorted arrays. Test top-1 per order, mean over --runs seeds.

trainfast does not expose the loader's order, so this uses PyTorch (CPU) for the model.
Usage: bench/quasi_shuffle.py [--build build] [--epochs 2] [--runs 2] [--width 16] [--threads 2]
                              [--subset N] [--orders seq,random,quasi] [--json]
Exit 77 when torch or the built library/tool is missing.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def orders(stand_in, order, seed, epochs, batch, block):
    """Each epoch's batches of record indices, from libfastload."""
    from fastload import Loader
    out = []
    with Loader(stand_in, batch_size=batch, workers=1, order=order, seed=seed,
                drop_last=True, quasi_block=block) as L:
        for _ in range(epochs):
            out.append([b.indices.copy() for b in L.epoch()])
    return out


def model(torch, w):
    nn = torch.nn

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.MaxPool2d(2),
                nn.BatchNorm2d(cout), nn.ReLU()]
    return nn.Sequential(*block(1, w), *block(w, 2 * w), *block(2 * w, 4 * w),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, 10))


def train(torch, xs, ys, xt, yt, batches, width, seed, lr):
    torch.manual_seed(seed)
    net = model(torch, width)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    total = sum(len(e) for e in batches)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / total))
    lossf = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    net.train()
    for epoch in batches:
        for ind in epoch:
            ind = torch.from_numpy(ind.astype(np.int64))
            opt.zero_grad()
            lossf(net(xs[ind]), ys[ind]).backward()
            opt.step()
            sched.step()
    net.eval()
    with torch.no_grad():
        pred = torch.cat([net(xt[i:i + 1000]).argmax(1) for i in range(0, len(xt), 1000)])
    return float((pred == yt).float().mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--orders", default="seq,random,quasi",
                    help="comma-separated; quasi:B uses blocks of B records (default 64)")
    ap.add_argument("--subset", type=int, default=0,
                    help="train on the first SUBSET/10 images of each class (0: all 60,000)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: no torch (apt-get install python3-torch)")
        return 77
    lib = os.path.join(a.build, "libfastload.so")
    mk = os.path.join(a.build, "tests", "trainer", "tf_make_dataset")
    if not os.path.exists(lib) or not os.access(mk, os.X_OK):
        print(f"SKIP: {lib} or {mk} not built")
        return 77
    os.environ["FASTLOAD_LIBRARY"] = lib
    sys.path.insert(0, os.path.join(ROOT, "python"))
    torch.set_num_threads(a.threads)
    d = os.path.join(ROOT, "samples", "fashion-mnist", "data")
    x = idx(os.path.join(d, "train-images-idx3-ubyte.gz"))
    y = idx(os.path.join(d, "train-labels-idx1-ubyte.gz"))
    s = np.argsort(y, kind="stable")  # class-sorted, as packdata lays out an ImageFolder tree
    if a.subset:
        per = a.subset // 10
        s = np.concatenate([s[y[s] == c][:per] for c in range(10)])
    xs = torch.from_numpy(((x[s].astype(np.float32) / 255) - 0.286) / 0.353).unsqueeze(1)
    ys = torch.from_numpy(y[s].astype(np.int64))
    xt = torch.from_numpy(((idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255)
                           - 0.286) / 0.353).unsqueeze(1)
    yt = torch.from_numpy(idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    res = {}
    with tempfile.TemporaryDirectory() as t:
        stand_in = os.path.join(t, "order")
        subprocess.run([mk, stand_in, str(len(s)), "10", "10", "1", "10", "1"], check=True,
                       stdout=subprocess.DEVNULL)
        for order in a.orders.split(","):
            accs = []
            name, _, blk = order.partition(":")
            for r in range(a.runs):
                t0 = time.time()
                batches = orders(stand_in, name, r, a.epochs, a.batch, int(blk or 0))
                acc = train(torch, xs, ys, xt, yt, batches, a.width, r, a.lr)
                accs.append(acc)
                print(f"{order:7s} seed {r}: test top-1 {acc:.4f} ({time.time() - t0:.0f} s)", file=sys.stderr)
            res[order] = accs
    print(f"fastcnn-shaped CNN (width {a.width}), {a.epochs} epochs, batch {a.batch}, Fashion-MNIST "
          f"({len(s)} training images) sorted by class, order from libfastload; test top-1, mean of {a.runs} seeds:")
    for o, v in res.items():
        print(f"  {o:7s} {np.mean(v):.4f}  ({', '.join(f'{x:.4f}' for x in v)})")
    if a.json:
        print(json.dumps({o: {"mean_top1": float(np.mean(v)), "top1": v} for o, v in res.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
