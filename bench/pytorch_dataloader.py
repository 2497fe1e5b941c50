#!/usr/bin/python3
"""pytorch_dataloader.py — the peer of `fastload bench`: PyTorch DataLoader + torchvision
ImageFolder + PIL with RandomResizedCrop + RandomHorizontalFlip + ToTensor-like uint8 batches.

Times E epochs from the first iter() (worker start-up included once: persistent_workers=True) and
prints one JSON object: images_per_sec, images, seconds, epochs, workers, batch_size.
The transform ends with PILToTensor (uint8 CHW) so that the work matches fastload's uint8 output
(no float conversion or normalization in either).
Usage: /usr/bin/python3 bench/pytorch_dataloader.py IMAGE_FOLDER [--workers 2] [--batch 256]
       [--size 224] [--epochs 1]
"""
import argparse
import gc
import json
import resource
import sys
import time

try:
    import torch
    import torchvision
    from torchvision import transforms
except ImportError:
    sys.exit("pytorch_dataloader.py: needs python3-torch and python3-torchvision (run with /usr/bin/python3)")


def make_loader(root, workers, batch, size, drop_last=False, pin_memory=True):
    """ImageFolder + PIL: RandomResizedCrop(size) + RandomHorizontalFlip + PILToTensor (uint8 CHW),
    shuffled, in `workers` persistent worker processes, pinned unless pin_memory is False. Returns (dataset, loader). Also
    used by bench/pytorch_train_loop.py."""
    tf = transforms.Compose([
        transforms.RandomResizedCrop(size),
        transforms.RandomHorizontalFlip(),
        transforms.PILToTensor(),
    ])
    ds = torchvision.datasets.ImageFolder(root, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                     pin_memory=pin_memory, drop_last=drop_last,
                                     persistent_workers=workers > 0)
    return ds, dl


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)
    _, dl = make_loader(a.root, a.workers, a.batch, a.size)
    def cpu():  # this process + its reaped children (the DataLoader workers, once shut down)
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    n = 0
    c0 = cpu()
    t0 = time.perf_counter()
    for _ in range(a.epochs):
        for x, y in dl:
            n += x.shape[0]
    dt = time.perf_counter() - t0
    del dl  # shuts the persistent workers down and reaps them, so their CPU time is counted
    gc.collect()
    cpu_s = cpu() - c0
    print(json.dumps({"images_per_sec": n / dt, "images": n, "seconds": dt, "cpu_seconds": cpu_s,
                      "images_per_cpu_sec": n / cpu_s if cpu_s else 0, "epochs": a.epochs,
                      "workers": a.workers, "batch_size": a.batch, "torch": torch.__version__,
                      "torchvision": torchvision.__version__}))


if __name__ == "__main__":
    main()
