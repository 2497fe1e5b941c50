#!/usr/bin/python3
"""pytorch_train_loop.py — the PyTorch peer of trainfast training from JPEG (bench/end_to_end.sh):
a plain training loop over a torch DataLoader whose worker processes decode the photos with PIL
and apply RandomResizedCrop + RandomHorizontalFlip (bench/pytorch_dataloader.py's make_loader,
drop_last as trainfast on one process), feeding the same network and recipe as trainfast
(bench/pytorch_fmnist.py's build_model, sgd, lr_schedule: SGD Nesterov 0.9, weight decay on
weights only, label smoothing 0.1, warm-up then linear decay; inputs scaled as trainfast's,
(x / 255 - 0.5) / 0.25), fp32 on the CPU, NCHW; --precision bf16 runs forward and loss under
torch.autocast('cpu', dtype=torch.bfloat16) (PyTorch's CPU mixed precision: bf16 convolutions and
matmuls, fp32 weights and optimizer), the peer of trainfast --precision bf16. The workers share the cores with the training
threads; torch.set_num_threads is left as PyTorch sets it (what a user gets) unless --threads.

Times the training steps of all epochs from the first iter() (worker start-up included once:
persistent workers), as trainfast's images_per_sec counts its steps including waiting for data,
and splits them into waiting for the DataLoader and computing. CPU seconds: this process and its
workers (reaped before they are read). No evaluation.
Prints one JSON object (the last stdout line): images_per_sec, images, seconds, wait_seconds,
cpu_seconds, images_per_cpu_sec, threads, workers, model, size, batch, epochs, torch.
Usage: /usr/bin/python3 bench/pytorch_train_loop.py IMAGE_FOLDER [--model fastcnn|resnet18]
       [--size 64] [--batch 128] [--epochs 1] [--workers 2] [--threads 0] [--width 24]
       [--precision fp32|bf16]
"""
import argparse
import gc
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_dataloader import make_loader, torch  # noqa: E402 (needs torch, torchvision)
from pytorch_fmnist import build_model, lr_schedule, sgd  # noqa: E402


def cpu_seconds():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root")
    ap.add_argument("--model", choices=["fastcnn", "resnet18"], default="fastcnn")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: left as is)")
    ap.add_argument("--width", type=int, default=24, help="fastcnn width (trainfast's default 24)")
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--wd", type=float, default=5e-4)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', bfloat16)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    ds, dl = make_loader(a.root, a.workers, a.batch, a.size, drop_last=True, pin_memory=False)
    model = build_model(a.model, 3, len(ds.classes), a.width)
    opt = sgd(model, a.lr, a.wd, a.momentum)
    lr_at = lr_schedule(a.lr, a.warmup, len(dl), a.epochs)
    crit = torch.nn.CrossEntropyLoss(label_smoothing=a.label_smoothing)
    mean, std = 0.5, 0.25  # trainfast's input scaling
    model.train()
    n = step = 0
    wait = 0.0
    c0 = cpu_seconds()
    t0 = time.perf_counter()
    for _ in range(a.epochs):
        it = iter(dl)
        while True:
            w0 = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            wait += time.perf_counter() - w0
            x = x.float() * (1.0 / (255.0 * std)) - mean / std
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
                loss = crit(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            n += x.shape[0]
            step += 1
    dt = time.perf_counter() - t0
    threads = torch.get_num_threads()
    del it, dl  # shuts the persistent workers down and reaps them, so their CPU time is counted
    gc.collect()
    cpu_s = cpu_seconds() - c0
    print(json.dumps({"images_per_sec": n / dt, "images": n, "seconds": dt, "wait_seconds": wait,
                      "cpu_seconds": cpu_s, "images_per_cpu_sec": n / cpu_s if cpu_s else 0,
                      "threads": threads, "workers": a.workers, "model": a.model, "size": a.size,
                      "batch": a.batch, "epochs": a.epochs, "final_loss": float(loss),
                      "precision": a.precision,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
