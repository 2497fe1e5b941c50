#!/usr/bin/env python3
"""ffcv_peer.py — the FFCV side of bench/ffcv_peer.sh, run under the FFCV venv's python (the
peer built from source by that script), plus a process timer both sides share.

  write SRC_FOLDER OUT.beton [--workers 2] [--quality 90]
      FFCV's DatasetWriter over torchvision's ImageFolder(SRC_FOLDER) (PIL decode to RGB):
      RGBImageField(write_mode='jpg', jpeg_quality=Q) — every image decoded and re-encoded at Q
      with OpenCV, no resize (max_resolution None) — and an IntField label. FFCV cannot store a
      file's bytes as they are: its peer in packdata is --encode jpeg --quality Q.
  load BETON [--workers 2] [--batch 256] [--size 224] [--epochs 6]
      FFCV's Loader (order RANDOM, os_cache, drop_last False) with RandomResizedCropRGBImage-
      Decoder((S, S)) (scale 0.08-1, ratio 3/4-4/3, FFCV's defaults, as fastload's) +
      RandomHorizontalFlip, labels IntDecoder: uint8 NHWC numpy batches in memory, no ToTensor,
      no GPU. FFCV runs its decode as Numba-compiled code on --workers threads inside this process.
      The first epoch (Loader construction and Numba's JIT included) and the later ones are
      reported apart; CPU is this process's rusage (all its threads) read at epoch boundaries
      (FFCV starts an epoch's prefetch only when that epoch is iterated, so they separate).
  time -- COMMAND ARGS...
      runs COMMAND, prints {"seconds", "cpu_seconds"} of it and its children (wait4 rusage).

Each prints one JSON object on stdout.
"""
import argparse
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import time


def cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ffcv_version():
    import ffcv
    return getattr(ffcv, "__version__", "?")


def cmd_write(a):
    import torchvision
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    ds = torchvision.datasets.ImageFolder(a.src)  # PIL loader: decoded RGB images
    if os.path.exists(a.out):
        os.unlink(a.out)
    t0, c0 = time.perf_counter(), cpu_self() + cpu_children()
    w = DatasetWriter(a.out, {"image": RGBImageField(write_mode="jpg", jpeg_quality=a.quality),
                              "label": IntField()}, num_workers=a.workers)
    w.from_indexed_dataset(ds)
    for p in multiprocessing.active_children():  # FFCV leaves its worker processes to exit:
        p.join()  # reaped here, their CPU time is in RUSAGE_CHILDREN
    dt, cpu = time.perf_counter() - t0, cpu_self() + cpu_children() - c0
    n = len(ds)
    print(json.dumps({"images_per_sec": n / dt, "images_per_cpu_sec": n / cpu, "images": n,
                      "seconds": dt, "cpu_seconds": cpu, "bytes": os.path.getsize(a.out),
                      "workers": a.workers, "quality": a.quality, "ffcv": ffcv_version()}))


def cmd_load(a):
    import numpy as np
    from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import RandomHorizontalFlip

    t0, c0 = time.perf_counter(), cpu_self()
    loader = Loader(a.beton, batch_size=a.batch, num_workers=a.workers, order=OrderOption.RANDOM,
                    os_cache=True, drop_last=False, seed=0,
                    pipelines={"image": [RandomResizedCropRGBImageDecoder((a.size, a.size)),
                                         RandomHorizontalFlip()],
                               "label": [IntDecoder()]})
    secs, cpus, counts = [], [], []
    shape = None
    for _ in range(a.epochs):
        n = 0
        for images, labels in loader:
            if shape is None:
                shape = list(images.shape)
                assert images.dtype == np.uint8, images.dtype
            n += images.shape[0]
        t1, c1 = time.perf_counter(), cpu_self()
        secs.append(t1 - t0)
        cpus.append(c1 - c0)
        counts.append(n)
        t0, c0 = t1, c1
    steady_n, steady_s, steady_c = sum(counts[1:]), sum(secs[1:]), sum(cpus[1:])
    print(json.dumps({
        "first_epoch_images_per_sec": counts[0] / secs[0],
        "first_epoch_images_per_cpu_sec": counts[0] / cpus[0],
        "steady_images_per_sec": steady_n / steady_s if steady_s else None,
        "steady_images_per_cpu_sec": steady_n / steady_c if steady_c else None,
        "images_per_sec_per_epoch": [n / s for n, s in zip(counts, secs)],
        "cpu_seconds_per_epoch": cpus, "seconds_per_epoch": secs, "images_per_epoch": counts,
        "batch_shape": shape, "workers": a.workers, "batch_size": a.batch, "epochs": a.epochs,
        "ffcv": ffcv_version()}))


def cmd_time(a):
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        sys.exit("ffcv_peer.py time: no command")
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc:
        sys.exit(f"ffcv_peer.py time: {cmd[0]} exited with {rc}")
    print(json.dumps({"seconds": dt, "cpu_seconds": ru.ru_utime + ru.ru_stime}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd_name", required=True)
    w = sub.add_parser("write")
    w.add_argument("src")
    w.add_argument("out")
    w.add_argument("--workers", type=int, default=2)
    w.add_argument("--quality", type=int, default=90)
    w.set_defaults(func=cmd_write)
    ld = sub.add_parser("load")
    ld.add_argument("beton")
    ld.add_argument("--workers", type=int, default=2)
    ld.add_argument("--batch", type=int, default=256)
    ld.add_argument("--size", type=int, default=224)
    ld.add_argument("--epochs", type=int, default=6)
    ld.set_defaults(func=cmd_load)
    t = sub.add_parser("time")
    t.add_argument("cmd", nargs=argparse.REMAINDER)
    t.set_defaults(func=cmd_time)
    a = ap.parse_args()
    if a.cmd_name == "load" and a.epochs < 2:
        ap.error("load: --epochs must be >= 2 (the first epoch is reported apart)")
    a.func(a)


if __name__ == "__main__":
    main()
