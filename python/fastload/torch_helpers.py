"""torch_helpers.py — fastload batches as torch tensors (only imported when torch is used).

torch_batches(loader, device=None, ...) wraps a Loader's iteration:
  * device None / "cpu" and normalize=False: uint8 NHWC tensors that share the batch memory
    (torch.from_numpy, no copy; valid until the next batch, like the numpy arrays);
  * otherwise the uint8 batch is moved to `device` first (a 4x smaller copy than float32),
    with non_blocking=True, then converted there to float NCHW (or channels_last) and normalized
    with (x / 255 - mean) / std. The batch's host memory is handed back to the loader only after
    the copy has completed (a CUDA event), so the next batch can be prepared meanwhile.
"""
import torch

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _convert(x, normalize, mean, std, dtype, channels_last):
    x = x.permute(0, 3, 1, 2)  # NHWC -> NCHW view
    if not normalize:
        return x.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    x = x.to(dtype).div_(255.0)
    if mean is not None:
        c = x.shape[1]
        m = torch.tensor(mean[:c], dtype=dtype, device=x.device).view(1, c, 1, 1)
        s = torch.tensor(std[:c], dtype=dtype, device=x.device).view(1, c, 1, 1)
        x = x.sub_(m).div_(s)
    return x.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def torch_batches(loader, device=None, normalize=True, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                  dtype=torch.float32, channels_last=False, non_blocking=True, epochs=1,
                  labels_dtype=torch.long):
    """Yield (images, labels) torch tensors for `epochs` epochs (None: without end) of `loader`.

    images: float `dtype` N×C×H×W normalized (normalize=True), or uint8 N×C×H×W (normalize=False
    and a device) or the zero-copy uint8 N×H×W×C view (normalize=False, no device).
    labels: `labels_dtype` tensor of N on `device`.
    """
    dev = torch.device(device) if device is not None else torch.device("cpu")
    on_cuda = dev.type == "cuda"
    done = 0
    pending = None  # (batch, event) whose host memory an asynchronous copy may still read
    try:
        while epochs is None or done < epochs:
            ended = False
            while not ended:
                b = loader.next_batch()
                ended = b.last_in_epoch
                x = torch.from_numpy(b.images)
                y = torch.from_numpy(b.labels)
                if on_cuda:
                    x = x.to(dev, non_blocking=non_blocking)
                    y = y.to(dev, non_blocking=non_blocking).to(labels_dtype)
                    ev = torch.cuda.Event()
                    ev.record()
                    if pending is not None:
                        pending[1].synchronize()
                        pending[0].release()
                    pending = (b, ev)
                    yield _convert(x, normalize, mean, std, dtype, channels_last), y
                elif normalize or dev.type != "cpu":
                    x = _convert(x.to(dev), normalize, mean, std, dtype, channels_last)
                    y = y.to(labels_dtype).to(dev)
                    b.release()
                    yield x, y
                else:
                    # zero-copy views: the batch is released when the next one is requested
                    if pending is not None:
                        pending[0].release()
                    pending = (b, None)
                    yield x, y.to(labels_dtype) if labels_dtype != torch.int32 else y
            done += 1
    finally:
        if pending is not None:
            if pending[1] is not None:
                pending[1].synchronize()
            pending[0].release()
