#!/usr/bin/python3
"""train_detection.py — a torchvision detector trained from a packed COCO set through fastload.torch.

  packdata pack --coco instances.json --root images coco-packed --masks
  /usr/bin/python3 examples/train_detection.py coco-packed --steps 300

The model is torchvision's fasterrcnn_mobilenet_v3_large_320_fpn from random weights (weights=None,
weights_backbone=None: nothing is downloaded) with num_classes = the set's categories + 1
(torchvision keeps label 0 for the background). fastload.torch.Loader reads, decodes, crops
(--augment: "none" resizes the whole image to --size; "object_crop" a random crop keeping at least
one box's centre; "rrc") and flips images, boxes and masks in C threads and hands over float32
N×C×H×W images in [0, 1] (the model normalizes them itself) beside the boxes, labels and counts;
fastload.torch.detection_targets turns each batch into the per-image target dicts the model takes.

With --val, the held-out set's AP at IoU 0.5 (mean over classes) before and after training.
Every --print-every steps it prints the mean loss (and its four parts) of those steps, images/s and
the data-wait fraction (time the loop waited for the next batch / wall time). At the end: the mean
loss of the first and of the last --window steps, whose fall shows the model learns, and with
--json a JSON line of the figures. Run from the source tree (python/ is put on sys.path) or with
the package installed.
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fastload.torch as ft  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("data", help="a data set packed by packdata pack --coco (fields image, boxes, labels)")
    ap.add_argument("--val", help="a held-out set packed the same way: AP50 before and after training")
    ap.add_argument("--steps", type=int, default=300, help="optimizer steps")
    ap.add_argument("--batch", type=int, default=4, help="images per step")
    ap.add_argument("--size", type=int, default=192,
                    help="images are SIZE x SIZE, and the model's own resize keeps them so (its 320 px "
                         "default costs 2.8x the CPU time per step)")
    ap.add_argument("--augment", default="none", choices=["none", "object_crop", "rrc"],
                    help="geometry, applied to image, boxes and mask alike (always with flip)")
    ap.add_argument("--scale", type=float, nargs=2, default=(0.3, 1.0),
                    help="object_crop / rrc: the crop's share of the image")
    ap.add_argument("--rois", type=int, default=64,
                    help="RoIs sampled per image for the box head (torchvision's default 512 makes its "
                         "1024-wide MLP most of a CPU step)")
    ap.add_argument("--proposals", type=int, default=500, help="RPN proposals kept per image in training")
    ap.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (after a linear warm-up)")
    ap.add_argument("--warmup", type=int, default=20, help="warm-up steps")
    ap.add_argument("--workers", type=int, default=2, help="fastload decode threads")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (on a busy 2-core machine, 2 threads wait for each other at "
                         "every barrier: 5x the CPU time per step)")
    ap.add_argument("--print-every", type=int, default=20, help="steps between progress lines")
    ap.add_argument("--window", type=int, default=20, help="steps averaged for the start / end loss")
    ap.add_argument("--seed", type=int, default=0, help="model init, order and augmentation")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")
    return ap.parse_args(argv)


def average_precision(model, path, size, classes, workers, iou=0.5):
    """Mean over the classes of the held-out set of VOC-style AP (all-point interpolation) at
    IoU >= `iou`, and the recall of all its boxes at that IoU (among every detection kept)."""
    from torchvision.ops import box_iou
    dets = {c: [] for c in range(1, classes + 1)}   # class -> [(score, is a true positive)]
    gts = {c: 0 for c in dets}
    found = 0
    model.eval()
    with torch.no_grad(), ft.Loader(path, batch_size=8, size=size, dtype="float32", mean=0, std=1,
                                    workers=workers) as L:
        for b in L:
            for out, t in zip(model(list(b["image"])), ft.detection_targets(b, mask=None)):
                for c in dets:
                    g = t["boxes"][t["labels"] == c]
                    keep = out["labels"] == c
                    boxes, scores = out["boxes"][keep], out["scores"][keep]
                    gts[c] += len(g)
                    used = torch.zeros(len(g), dtype=torch.bool)
                    ious = box_iou(boxes, g) if len(g) and len(boxes) else None
                    for j in scores.argsort(descending=True).tolist():
                        tp = False
                        if ious is not None:
                            v, k = ious[j].masked_fill(used, -1).max(0)
                            if v >= iou:
                                used[k], tp = True, True
                        dets[c].append((scores[j].item(), tp))
                    found += int(used.sum())
    model.train()
    aps = []
    for c, d in dets.items():
        if not gts[c]:
            continue
        d.sort(key=lambda x: -x[0])
        tp = torch.tensor([float(x[1]) for x in d]).cumsum(0) if d else torch.zeros(0)
        prec = tp / torch.arange(1, len(d) + 1) if d else torch.zeros(0)
        rec = tp / gts[c]
        # all-point interpolation: precision made non-increasing, summed over recall steps
        ap, prev_r = 0.0, 0.0
        for i in range(len(d)):
            if d[i][1]:
                ap += (rec[i].item() - prev_r) * prec[i:].max().item()
                prev_r = rec[i].item()
        aps.append(ap)
    return sum(aps) / max(1, len(aps)), found / max(1, sum(gts.values()))


def main(argv=None):
    a = parse_args(argv)
    import torchvision
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    loader = ft.Loader(a.data, batch_size=a.batch, size=a.size, augment=a.augment, flip=True,
                       scale=tuple(a.scale), seed=a.seed, workers=a.workers, drop_last=True,
                       dtype="float32", mean=0, std=1)
    classes = loader.dataset.classes
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=len(classes) + 1,
        min_size=a.size, max_size=a.size, box_batch_size_per_image=a.rois, rpn_pre_nms_top_n_train=a.proposals,
        rpn_post_nms_top_n_train=a.proposals)
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=a.lr,
                            weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, a.warmup)))
    print(f"train_detection: {a.data}: {len(loader.dataset)} images, {len(classes)} classes "
          f"{classes}; {len(loader)} steps an epoch of {a.batch}; fasterrcnn_mobilenet_v3_large_320_fpn "
          f"(random init), {a.steps} steps at {a.size} px, augment {a.augment} + flip", flush=True)
    ap0 = rec0 = None
    if a.val:
        ap0, rec0 = average_precision(model, a.val, a.size, len(classes), a.workers)
        print(f"before training: val AP50 {ap0:.4f}, recall {rec0:.4f}", flush=True)
    losses, parts_sum = [], {}
    step, epoch = 0, 0
    t0 = time.perf_counter()
    tick, wait, wait_tick = t0, 0.0, 0.0
    done = False
    while not done:
        loader.set_epoch(epoch)
        it = iter(loader)
        while True:
            w0 = time.perf_counter()
            b = next(it, None)
            dt = time.perf_counter() - w0
            wait += dt
            wait_tick += dt
            if b is None:
                break
            images = list(b["image"])                  # [3, S, S] float32 each
            targets = ft.detection_targets(b, mask=None)  # boxes float32 [n, 4], labels int64 [n]
            parts = model(images, targets)
            loss = sum(parts.values())
            if not math.isfinite(loss.item()):
                sys.exit(f"train_detection: step {step}: loss {loss.item()} is not finite")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            for k, v in parts.items():
                parts_sum[k] = parts_sum.get(k, 0.0) + v.item()
            step += 1
            if step % a.print_every == 0 or step == a.steps:
                now = time.perf_counter()
                n = step % a.print_every or a.print_every
                part = ", ".join(f"{k.replace('loss_', '')} {v / n:.3f}" for k, v in parts_sum.items())
                print(f"step {step}/{a.steps} (epoch {epoch}): loss {sum(losses[-n:]) / n:.4f} "
                      f"({part}); {n * a.batch / (now - tick):.1f} img/s, data wait "
                      f"{100 * wait_tick / (now - tick):.1f}%", flush=True)
                tick, wait_tick, parts_sum = now, 0.0, {}
            if step == a.steps:
                done = True
                break
        epoch += 1
    wall = time.perf_counter() - t0
    loader.close()
    k = min(a.window, max(1, len(losses) // 2))
    start, end = sum(losses[:k]) / k, sum(losses[-k:]) / k
    print(f"loss: first {k} steps {start:.4f} -> last {k} steps {end:.4f} "
          f"({100 * (start - end) / start:.1f}% lower); {step} steps, {step * a.batch} images, "
          f"{wall:.1f} s ({step * a.batch / wall:.1f} img/s), data wait {100 * wait / wall:.1f}%")
    figures = {"steps": step, "batch": a.batch, "size": a.size, "loss_start": start, "loss_end": end,
               "window": k, "wall_s": wall, "data_wait": wait / wall,
               "images_per_sec": step * a.batch / wall}
    if a.val:
        ap1, rec1 = average_precision(model, a.val, a.size, len(classes), a.workers)
        print(f"val AP50: before training {ap0:.4f} -> after {ap1:.4f}; recall {rec0:.4f} -> {rec1:.4f}")
        figures.update(ap50_before=ap0, ap50_after=ap1, recall_before=rec0, recall_after=rec1)
    if a.json:
        print(json.dumps(figures))
    return start, end


if __name__ == "__main__":
    main()
