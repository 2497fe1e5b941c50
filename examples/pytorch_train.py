#!/usr/bin/python3
"""pytorch_train.py — a PyTorch training loop fed by fastload instead of torch.utils.data.DataLoader.

What changes against the usual DataLoader loop:
  * the dataset is packed once with `packdata pack IMAGE_FOLDER DST` (JPEGs kept as they are);
  * fastload.Loader does the reading, decoding, random-resized-crop and flip in C threads, and
    fastload.torch_batches hands over uint8 batches, moved to the GPU as uint8 (4x less PCIe
    traffic than float32) and normalized there;
  * the loader's position goes into the checkpoint: a resumed run sees exactly the batches the
    interrupted one would have seen (mid-epoch included).

Usage:
  /usr/bin/python3 examples/pytorch_train.py DST [--val DST_VAL] [--epochs 10] [--batch 256]
      [--size 224|0] [--workers 4] [--model resnet18|small] [--lr 0.1] [--device cuda|cpu]
      [--checkpoint ckpt.pt] [--max-steps N]
Run from the source tree (PYTHONPATH=python) or with the package installed.
The models take RGB: grayscale datasets (e.g. Fashion-MNIST) are expanded to 3 channels by the
loader (channels=3). --size 0 keeps a fixed-size (raw) dataset's own size, without resizing.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fastload  # noqa: E402


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


def evaluate(model, path, args, device):
    # evaluation: resize + center crop, sequential order, every sample once (drop_last=False pads
    # the tail by wrap-around, so count only the first samples_per_epoch... of the real dataset)
    with fastload.Loader(path, batch_size=args.batch, workers=args.workers, size=args.size or None,
                         augment="center" if args.size else "none", order="seq", channels=3) as L:
        n_total = L.dataset_size
        correct = seen = 0
        model.eval()
        with torch.no_grad():
            for x, y in fastload.torch_batches(L, device=device):
                take = min(len(y), n_total - seen)
                pred = model(x[:take]).argmax(1)
                correct += (pred == y[:take]).sum().item()
                seen += take
        model.train()
    return correct / max(seen, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("train")
    ap.add_argument("--val")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224,
                    help="output side in pixels (0: the dataset's fixed size, no resize)")
    ap.add_argument("--workers", type=int, default=0, help="decode threads (0: all CPUs)")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--checkpoint", help="save here after every epoch; resume from it when present")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N steps (smoke runs)")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    # DataLoader(ImageFolder(...), batch_size, shuffle=True, num_workers, pin_memory) becomes:
    loader = fastload.Loader(args.train, batch_size=args.batch, workers=args.workers,
                             size=args.size or None, augment="rrc" if args.size else "none",
                             flip=True, order="random", seed=args.seed, drop_last=True,
                             channels=3)  # the models are RGB; gray data is expanded
    num_classes = len(loader.class_names) or 1000
    model = make_model(args.model, num_classes).to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-5)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)

    if args.checkpoint and os.path.exists(args.checkpoint):
        ck = torch.load(args.checkpoint, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        loader.load_state_dict(ck["loader"])  # continues at the exact next batch
        print(f"resumed from {args.checkpoint} at epoch {ck['loader']['epoch']} batch {ck['loader']['batch']}")

    step = 0
    start_epoch = loader.state_dict()["epoch"]
    for epoch in range(start_epoch, args.epochs):
        t0 = time.perf_counter()
        seen, loss_sum = 0, 0.0
        for x, y in fastload.torch_batches(loader, device=device, channels_last=device.type == "cuda"):
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            seen += len(y)
            loss_sum += loss.item() * len(y)
            step += 1
            if args.max_steps and step >= args.max_steps:
                break
        dt = time.perf_counter() - t0
        st = loader.stats()
        print(f"epoch {epoch}: loss {loss_sum / max(seen, 1):.4f}, {seen / dt:.0f} img/s, "
              f"loader wait {st['consumer_wait_s']:.2f} s (total), io {st['io_backend']}")
        if args.checkpoint:
            tmp = args.checkpoint + ".tmp"
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "loader": loader.state_dict()}, tmp)
            os.replace(tmp, args.checkpoint)  # a killed save never leaves a half checkpoint
        if args.val:
            print(f"  val top-1: {evaluate(model, args.val, args, device):.4f}")
        if args.max_steps and step >= args.max_steps:
            break
    loader.close()


if __name__ == "__main__":
    main()
