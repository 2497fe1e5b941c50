#!/usr/bin/python3
"""loader_python.py — the Python binding's own benchmark: iterate fastload.Loader over a packed
dataset with the same options as `fastload bench` and print one JSON object (images_per_sec,
mb_per_sec, images, seconds, epochs), so bench/loader.sh can put the two side by side.
The consumer does what `fastload bench` does: takes each batch (numpy views) and hands it back.
Usage: /usr/bin/python3 bench/loader_python.py DST [--workers 2] [--batch 256] [--size 224]
       [--augment rrc,flip] [--order random] [--epochs 1] [--seed 0] [--io auto] [--direct]
"""
import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fastload  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dst")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=0, help="0: the dataset's fixed size")
    ap.add_argument("--augment", default="none")
    ap.add_argument("--order", default="random")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--io", default="auto")
    ap.add_argument("--direct", action="store_true")
    a = ap.parse_args()
    # timing starts before the loader exists: its workers fill the ring during construction
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    try:
        L = fastload.Loader(a.dst, batch_size=a.batch, workers=a.workers, size=a.size or None,
                            augment=a.augment, order=a.order, seed=a.seed, io=a.io, direct=a.direct)
    except fastload.Error as e:
        sys.exit(f"loader_python.py: error: {e}")
    n = nbytes = 0
    with L:
        for _ in range(a.epochs):
            for images, labels in L:
                n += len(labels)
                nbytes += images.nbytes + labels.nbytes
        dt = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        st = L.stats()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print(json.dumps({"images_per_sec": n / dt, "mb_per_sec": nbytes / dt / 1e6, "images": n,
                      "seconds": dt, "cpu_seconds": cpu, "images_per_cpu_sec": n / cpu if cpu else 0,
                      "epochs": a.epochs, "workers": a.workers,
                      "io_backend": st["io_backend"], "library": fastload.library_path()}))


if __name__ == "__main__":
    main()
