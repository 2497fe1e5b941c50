"""fastload — Python binding of libfastload (ctypes, no compile step).

    import fastload
    L = fastload.Loader("data/packed", batch_size=256, workers=2, size=(224, 224),
                        augment="rrc", flip=True, order="random", seed=0)
    for epoch in range(10):
        for images, labels in L:          # one epoch; numpy views of the pinned batch
            ...                           # images: (N, H, W, C) uint8, labels: (N,) int32
        ckpt = {"loader": L.state_dict()} # resume later with L.load_state_dict(ckpt["loader"])

    # PyTorch: an iterable of (images, labels) tensors, normalized on the GPU (see fastload.torch)
    import fastload.torch as ft
    loader = ft.Loader("data/packed", batch_size=256, size=224, augment="rrc", flip=True,
                       device="cuda", dtype="bfloat16", layout="channels_last")

The library is $FASTLOAD_LIBRARY when set, else the one inside this package (pip install ./python),
else, in a source checkout, the build tree (build/libfastload.so); fastload.library_path() says which.
"""
from ._native import library_path
from .errors import (CorruptRecordError, DataIOError, Error, InvalidOptionError,
                     LoaderClosedError, LoaderForkedError, UnsupportedError)
from .loader import Batch, FieldsBatch, Loader

__all__ = ["Loader", "Batch", "FieldsBatch", "Error", "CorruptRecordError", "DataIOError", "InvalidOptionError",
           "LoaderClosedError", "LoaderForkedError", "UnsupportedError", "torch_batches", "version", "library_path"]
from ._native import PACKAGE_VERSION as __version__  # from CMakeLists.txt, via _version.py


def version() -> str:
    """Version string of the loaded libfastload."""
    from ._native import lib
    return lib().fl_version().decode()


def torch_batches(loader, device=None, **kwargs):
    """Deprecated (use fastload.torch.Loader): batches of the fastload.Loader `loader` as torch
    tensors; see fastload.torch_helpers.torch_batches."""
    try:
        from .torch_helpers import torch_batches as tb
    except ImportError as e:  # torch missing
        raise ImportError("fastload.torch_batches needs torch (pip or apt python3-torch)") from e
    return tb(loader, device=device, **kwargs)
