#!/usr/bin/python3
"""sigint_soak.py — SIGINT at random moments while a Loader streams batches: no batch lost,
repeated or out of order, no ring slot leaked, no Ctrl-C swallowed by a finalizer.

usage: sigint_soak.py DATASET RUNS BATCHES [--torch]
Each run opens a Loader (batch 3: the epoch's last batch is short) and asks for BATCHES batches
through epoch(), batches(n) and next_batch() in turn while a thread sends this process SIGINT
every 0.1-2 ms; every KeyboardInterrupt is caught and the loop goes on. The batches delivered
must be (0, 0), (0, 1), ... in order, each with the right records and pixels; then every slot
must be free (the consumer can hold all ring slots but one without a copy, and one more as a
copy). --torch: the same through fastload.torch.Loader (float32 conversion). Prints one line per
run; exit 0 pass, 1 fail."""
import gc
import os
import random
import signal
import sys
import threading

import numpy as np

import fastload

K, BS = 4, 3


def record_of(images):
    return ((np.asarray(images)[:, 0, 0, 0].astype(np.int64) * 183) % 256).tolist()


def main():
    ds, runs, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    use_torch = "--torch" in sys.argv
    armed = [False]

    def on_sigint(signum, frame):
        if armed[0]:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    failures = 0
    total_interrupts = 0
    for run in range(runs):
        rng = random.Random(run)
        if use_torch:
            import fastload.torch as ft
            T = ft.Loader(ds, batch_size=BS, order="seq", workers=2, dtype="float32", mean=0, std=1)
            L = T.loader
        else:
            T = None
            L = fastload.Loader(ds, batch_size=BS, order="seq", workers=2)
        n = L.dataset_size
        bpe = len(L)
        stop = threading.Event()

        def pelt():
            r = random.Random(1000 + run)
            while not stop.wait(r.uniform(0.0001, 0.002)):
                os.kill(os.getpid(), signal.SIGINT)

        t = threading.Thread(target=pelt, daemon=True)
        got, seen, interrupts, errors = [], [], 0, []

        def settle(b):
            # b: a fastload.Batch, or (images, labels) from fastload.torch (its position from its
            # records: sequential order)
            if T is None:
                images, labels, pos = b.images, b.labels, (b.epoch, b.batch)
            else:
                images, labels = b
                images = (images.numpy().transpose(0, 2, 3, 1) * 255).round().astype(np.uint8)
                labels = labels.numpy()
            idx = record_of(images)
            if T is not None:
                pos = (None, idx[0] // BS)
            k = pos[1]
            if idx != list(range(k * BS, min(n, (k + 1) * BS))):
                errors.append(f"batch {pos}: records {idx}")
            if list(labels) != [i % K for i in idx]:
                errors.append(f"batch {pos}: labels {list(labels)}")
            seen.append(pos)

        hold = rng.randint(1, 2)
        t.start()
        while len(seen) + len(got) < want:
            try:
                armed[0] = True
                mode = (len(seen) // 7) % 3 if T is None else 0
                left = want - len(seen) - len(got)
                if T is not None:
                    for x, y in T:
                        got.append((x, y))
                        del x, y
                        if len(got) >= hold:
                            armed[0] = False
                            settle(got.pop(0))
                            armed[0] = True
                        if len(seen) + len(got) >= want:
                            break
                elif mode == 0:
                    for b in L:
                        got.append(b)
                        del b
                        if len(got) >= hold:
                            armed[0] = False
                            settle(got.pop(0))
                            armed[0] = True
                        if len(seen) + len(got) >= want:
                            break
                elif mode == 1:
                    for b in L.batches(min(left, 5)):
                        got.append(b)
                        del b
                        if len(got) >= hold:
                            armed[0] = False
                            settle(got.pop(0))
                            armed[0] = True
                else:
                    got.append(L.next_batch())
                    if len(got) >= hold:
                        armed[0] = False
                        settle(got.pop(0))
                armed[0] = False
            except KeyboardInterrupt:
                armed[0] = False
                interrupts += 1
        stop.set()
        t.join()
        armed[0] = False
        while got:
            settle(got.pop(0))
        total_interrupts += interrupts
        expect = [(j // bpe if T is None else None, j % bpe) for j in range(len(seen))]
        if seen != expect:
            bad = next(i for i, (a, b) in enumerate(zip(seen, expect)) if a != b)
            errors.append(f"order: delivered {seen[max(0, bad - 2):bad + 3]}, expected "
                          f"{expect[max(0, bad - 2):bad + 3]}")
        # no slot leaked: all but one held without a copy, then one more as a copy
        L.release()  # the loader's own reference to the batch iteration handed out last
        gc.collect()
        r = L._ring
        r.drain()
        held = len(r.held) if hasattr(r, "held") else r.live
        if held:
            errors.append(f"{held} slot(s) still counted as held")
        try:
            L.load_state_dict({"epoch": 0, "batch": 0})
            r = L._ring
            held = [L.next_batch() for _ in range(r.nslots - 1)]
            if any(b.copied for b in held):
                errors.append("a batch came as a copy with a free slot")
            held.append(L.next_batch())
            if not held[-1].copied:
                errors.append("the last slot was not copied")
        except fastload.Error as e:
            errors.append(f"ring slot leaked: {e}")
        del held
        if T is not None:
            T.close()
        L.close()
        print(f"run {run}: {len(seen)} batches, {interrupts} interrupts, "
              f"{'ok' if not errors else 'FAIL: ' + '; '.join(errors[:3])}", flush=True)
        failures += bool(errors)
    print(f"{runs} runs, {total_interrupts} interrupts, {failures} failed")
    if total_interrupts == 0:
        print("no interrupt was delivered: the soak tested nothing")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
