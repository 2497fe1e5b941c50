"""_native.py — find libfastload.so and declare its C API (loader/fastload.h) for ctypes.

The structures below mirror loader/fastload.h field by field. The library may append fields to
its option and stats structures in later versions, so the buffers handed to C are over-allocated
(see _Padded): a newer library writing a longer struct cannot overrun them.
"""
import ctypes
import ctypes.util
import glob
import os

LIB_ENV = "FASTLOAD_LIBRARY"


class fl_error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 768)]


LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


class fl_loader_options(ctypes.Structure):
    _fields_ = [
        ("batch_size", ctypes.c_uint32),
        ("workers", ctypes.c_uint32),
        ("prefetch", ctypes.c_uint32),
        ("out_height", ctypes.c_uint32),
        ("out_width", ctypes.c_uint32),
        ("channels", ctypes.c_uint32),
        ("augment", ctypes.c_int),
        ("flip", ctypes.c_int),
        ("scale_min", ctypes.c_float),
        ("scale_max", ctypes.c_float),
        ("ratio_min", ctypes.c_float),
        ("ratio_max", ctypes.c_float),
        ("center_ratio", ctypes.c_float),
        ("order", ctypes.c_int),
        ("quasi_block", ctypes.c_uint32),
        ("quasi_window", ctypes.c_uint32),
        ("seed", ctypes.c_uint64),
        ("rank", ctypes.c_uint32),
        ("world", ctypes.c_uint32),
        ("drop_last", ctypes.c_int),
        ("io", ctypes.c_int),
        ("direct", ctypes.c_int),
        ("queue_depth", ctypes.c_uint32),
        ("on_corrupt", ctypes.c_int),
        ("pinned", ctypes.c_int),
        ("device", ctypes.c_int),
        ("start_epoch", ctypes.c_uint64),
        ("start_batch", ctypes.c_uint64),
        ("log", LOG_FN),
        ("log_user", ctypes.c_void_p),
        ("decode_flags", ctypes.c_uint32),
        ("memory_max", ctypes.c_int64),
    ]


class fl_batch(ctypes.Structure):
    _fields_ = [
        ("images", ctypes.POINTER(ctypes.c_uint8)),
        ("labels", ctypes.POINTER(ctypes.c_int32)),
        ("indices", ctypes.POINTER(ctypes.c_uint64)),
        ("size", ctypes.c_uint32),
        ("height", ctypes.c_uint32),
        ("width", ctypes.c_uint32),
        ("channels", ctypes.c_uint32),
        ("epoch", ctypes.c_uint64),
        ("batch", ctypes.c_uint64),
        ("last_in_epoch", ctypes.c_int),
        ("skipped", ctypes.c_uint32),
        ("device_images", ctypes.c_void_p),
        ("device_labels", ctypes.c_void_p),
        ("event", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
    ]


class fl_loader_stats(ctypes.Structure):
    _fields_ = [
        ("images", ctypes.c_uint64),
        ("batches", ctypes.c_uint64),
        ("bytes_read", ctypes.c_uint64),
        ("skipped", ctypes.c_uint64),
        ("io_wait_s", ctypes.c_double),
        ("decode_s", ctypes.c_double),
        ("augment_s", ctypes.c_double),
        ("slot_wait_s", ctypes.c_double),
        ("consumer_wait_s", ctypes.c_double),
        ("wall_s", ctypes.c_double),
        ("io_backend", ctypes.c_char_p),
        ("pinned_bytes", ctypes.c_uint64),
    ]


def padded(struct_type, reserve=1024):
    """A struct followed by `reserve` spare bytes, for structs the library may extend at the end."""
    return type("Padded_" + struct_type.__name__, (ctypes.Structure,),
                {"_fields_": [("s", struct_type), ("_reserve", ctypes.c_uint8 * reserve)]})


PaddedOptions = padded(fl_loader_options)
PaddedStats = padded(fl_loader_stats)

# enum values of loader/fastload.h
ORDER = {"seq": 0, "sequential": 0, "random": 1, "quasi": 2}
AUGMENT = {"none": 0, "center": 1, "rrc": 2}
IO = {"auto": 0, "uring": 1, "io_uring": 1, "pread": 2, "mmap": 3, "memory": 4}
ON_CORRUPT = {"error": 0, "skip": 1}
DECODE = {"accurate": 0, "fast": 3}  # FL_DECODE_FAST of imaging/fl_image.h


def _candidates():
    env = os.environ.get(LIB_ENV)
    if env:
        yield env
        return  # an explicit choice is not second-guessed: a wrong path is an error
    here = os.path.dirname(os.path.abspath(__file__))
    # installed layouts: the library beside the package, or in the lib/ dir above site-packages
    libdir = os.path.normpath(os.path.join(here, "..", "..", ".."))
    for d in [here, libdir] + sorted(glob.glob(os.path.join(libdir, "*-linux-gnu*"))):
        for name in ("libfastload.so", "libfastload.so.0"):
            yield os.path.join(d, name)
    # the build tree of a source checkout: <repo>/build*/libfastload.so (build/ first)
    repo = os.path.normpath(os.path.join(here, "..", ".."))
    bindir = os.environ.get("FL_BINARY_DIR")
    if bindir:
        yield os.path.join(bindir, "libfastload.so")
    yield os.path.join(repo, "build", "libfastload.so")
    for p in sorted(glob.glob(os.path.join(repo, "build*", "libfastload.so"))):
        yield p
    found = ctypes.util.find_library("fastload")
    if found:
        yield found


def find_library():
    """Path of the libfastload to load: $FASTLOAD_LIBRARY, then next to the package, then the
    build tree (build/libfastload.so in the repository), then the system search path."""
    tried = []
    for p in _candidates():
        tried.append(p)
        if os.environ.get(LIB_ENV) or os.path.exists(p) or "/" not in p:
            return p, tried
    return None, tried


_lib = None
_lib_path = None


def lib():
    """The loaded library (loaded and declared on first use)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    path, tried = find_library()
    if path is None:
        raise OSError("fastload: libfastload.so not found; set FASTLOAD_LIBRARY or build the "
                      "project (cmake -B build && cmake --build build). Tried: " + ", ".join(tried))
    L = ctypes.CDLL(path)
    L.fl_version.restype = ctypes.c_char_p
    L.fl_version.argtypes = []
    L.fl_strerror.restype = ctypes.c_char_p
    L.fl_strerror.argtypes = [ctypes.c_int]
    L.fl_loader_options_init.restype = None
    L.fl_loader_options_init.argtypes = [ctypes.c_void_p]
    L.fl_loader_create.restype = ctypes.c_int
    L.fl_loader_create.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.POINTER(fl_error)]
    L.fl_loader_next.restype = ctypes.c_int
    L.fl_loader_next.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(fl_batch)),
                                 ctypes.POINTER(fl_error)]
    L.fl_loader_release.restype = None
    L.fl_loader_release.argtypes = [ctypes.c_void_p, ctypes.POINTER(fl_batch)]
    L.fl_loader_batches_per_epoch.restype = ctypes.c_uint64
    L.fl_loader_batches_per_epoch.argtypes = [ctypes.c_void_p]
    L.fl_loader_samples_per_epoch.restype = ctypes.c_uint64
    L.fl_loader_samples_per_epoch.argtypes = [ctypes.c_void_p]
    L.fl_loader_position.restype = None
    L.fl_loader_position.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                                     ctypes.POINTER(ctypes.c_uint64)]
    L.fl_loader_stats_get.restype = None
    L.fl_loader_stats_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    L.fl_loader_dataset.restype = ctypes.c_void_p
    L.fl_loader_dataset.argtypes = [ctypes.c_void_p]
    L.fl_loader_close.restype = None
    L.fl_loader_close.argtypes = [ctypes.c_void_p]
    L.fl_dataset_count.restype = ctypes.c_uint64
    L.fl_dataset_count.argtypes = [ctypes.c_void_p]
    # optional accessors (a mock or an older library may lack them)
    for name, res, args in (("fl_dataset_num_classes", ctypes.c_uint32, [ctypes.c_void_p]),
                            ("fl_dataset_class_name", ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_uint32])):
        try:
            fn = getattr(L, name)
            fn.restype, fn.argtypes = res, args
        except AttributeError:
            pass
    _lib, _lib_path = L, path
    return L


def library_path():
    """Path of the loaded libfastload (loads it if needed)."""
    lib()
    return _lib_path
