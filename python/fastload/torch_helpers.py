"""torch_helpers.py — the old fastload.torch_batches(loader, ...), kept for existing scripts as a
thin wrapper over fastload.torch (which new code should use: fastload.torch.Loader).
"""
import warnings

import torch

from .torch import IMAGENET_MEAN, IMAGENET_STD, _Feeder  # noqa: F401


def torch_batches(loader, device=None, normalize=True, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                  dtype=torch.float32, channels_last=False, non_blocking=True, epochs=1,
                  labels_dtype=torch.long):
    """Deprecated: use fastload.torch.Loader. Yield (images, labels) torch tensors for `epochs`
    epochs (None: without end) of the fastload.Loader `loader`.

    images: float `dtype` N×C×H×W (channels_last=True: that memory format) normalized as
    (x / 255 - mean) / std (mean=None: x / 255), or, normalize=False, the uint8 N×H×W×C batch
    (zero-copy on the CPU: the tensor keeps the batch's ring slot). labels: `labels_dtype` on
    `device`. non_blocking is always used on CUDA (from the pinned batch, on a side stream).
    """
    warnings.warn("fastload.torch_batches is deprecated: use fastload.torch.Loader",
                  DeprecationWarning, stacklevel=2)
    del non_blocking
    if mean is None:
        mean, std = 0.0, 1.0
    feed = _Feeder(device, dtype if normalize else None, "channels_last" if channels_last else "nchw",
                   mean, std)
    done = 0
    try:
        while epochs is None or done < epochs:
            last = False
            while not last:
                loader._current = None
                feed.make_room()
                b = loader._current = loader.next_batch()
                last = b.last_in_epoch
                x, y = feed(b)
                del b
                yield x, y if labels_dtype == torch.int64 else y.to(labels_dtype)
            done += 1
    finally:
        loader._current = None
        feed.close()
