"""_native.py — find libfastload.so, check its ABI and declare its C API (loader/fastload.h) for ctypes.

Which library: $FASTLOAD_LIBRARY when set (nothing else is tried), else libfastload.so inside the
package (what `pip install ./python` puts there), else, only when this is python/fastload of a
source checkout, the build tree: $FL_BINARY_DIR/libfastload.so or build/libfastload.so.
library_path() / library_origin() say which was loaded. Before the first call the library's
fl_abi_info_get() (version, FL_ABI_VERSION, sizeof of each shared struct) must match this module:
a mismatch raises ImportError naming both.

The structures below mirror loader/fastload.h field by field. The library may append fields to
its option and stats structures in later versions, so the buffers handed to C are over-allocated
(see _Padded): a newer library writing a longer struct cannot overrun them.
"""
import ctypes
import os
import re

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
        ("box_min_visible", ctypes.c_float),
        ("decode_memory", ctypes.c_int64),
        ("max_batches", ctypes.c_uint64),
        ("jpeg_index_memory", ctypes.c_int64),
    ]


MAX_DIMS = 4  # FL_MAX_DIMS of formats/fl_fields.h


class fl_batch_field(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("type", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_uint32),
        ("shape", ctypes.c_uint64 * (MAX_DIMS + 2)),
        ("data", ctypes.c_void_p),
        ("counts", ctypes.POINTER(ctypes.c_int32)),
        ("bytes", ctypes.c_uint64),
        ("device_data", ctypes.c_void_p),
        ("device_counts", ctypes.c_void_p),
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
        ("num_fields", ctypes.c_uint32),
        ("fields", ctypes.POINTER(fl_batch_field)),
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
        ("decode_memory_peak", ctypes.c_uint64),
        ("decode_memory_wait_s", ctypes.c_double),
        ("jpeg_index_bytes", ctypes.c_uint64),
    ]


def padded(struct_type, reserve=1024):
    """A struct followed by `reserve` spare bytes, for structs the library may extend at the end."""
    return type("Padded_" + struct_type.__name__, (ctypes.Structure,),
                {"_fields_": [("s", struct_type), ("_reserve", ctypes.c_uint8 * reserve)]})


PaddedOptions = padded(fl_loader_options)
PaddedStats = padded(fl_loader_stats)

# Enum values of the C headers, by the names the Python options use. tests/python/test_headers.py
# parses the headers and checks every value here (and that no enumerator is missing).
ORDER = {"seq": 0, "sequential": 0, "random": 1, "quasi": 2}            # fl_order (fastload.h)
AUGMENT = {"none": 0, "center": 1, "rrc": 2, "object_crop": 3}          # fl_augment
IO = {"auto": 0, "uring": 1, "io_uring": 1, "pread": 2, "mmap": 3, "memory": 4}  # fl_io_mode
ON_CORRUPT = {"error": 0, "skip": 1}                                    # fl_on_corrupt
DECODE = {"accurate": 0, "fast": 3}  # FL_DECODE_FAST of imaging/fl_image.h
FIELD_TYPE = {"image": 1, "int": 2, "int_list": 3, "float": 4, "float_vector": 5, "boxes": 6,
              "mask": 7, "ndarray": 8, "bytes": 9, "text": 10}           # fl_field_type (fl_fields.h)
DTYPE = {"uint8": 1, "int8": 2, "uint16": 3, "int16": 4, "int32": 5, "int64": 6, "float16": 7,
         "float32": 8, "float64": 9}                                    # fl_dtype (fl_fields.h)
MASK_CODEC = {"png": 1, "zstd": 2}                                      # fl_mask_codec (fl_fields.h)
ENCODING = {"jpeg": 1, "png": 2, "raw": 3, "webp": 4, "mixed": 5, "none": 6}  # fl_encoding (fl_dataset.h)
COMPRESSION = {"none": 0, "zstd": 1}                                    # fl_compression
BACKEND = {"shards": 1, "lmdb": 2}                                      # fl_backend


class fl_abi_info(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_char_p),
        ("abi_version", ctypes.c_uint32),
        ("sizeof_error", ctypes.c_uint32),
        ("sizeof_loader_options", ctypes.c_uint32),
        ("sizeof_batch", ctypes.c_uint32),
        ("sizeof_loader_stats", ctypes.c_uint32),
        ("sizeof_batch_field", ctypes.c_uint32),
    ]


ABI_VERSION = 5  # FL_ABI_VERSION of loader/fastload.h that the declarations above mirror
_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.normpath(os.path.join(_HERE, "..", ".."))


def _source_checkout():
    """The repository root when this package is python/fastload of a source checkout, else None."""
    cm = os.path.join(_REPO, "CMakeLists.txt")
    try:
        with open(cm, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    return text if re.search(r"project\(\s*fastload\b", text) else None


def _package_version():
    """The version this package was built for: _version.py, written at build time from
    CMakeLists.txt (python/setup.py), or in a source checkout CMakeLists.txt itself."""
    try:
        from ._version import version
        return version
    except ImportError:
        pass
    text = _source_checkout()
    m = re.search(r"project\(\s*fastload\s+VERSION\s+([0-9][0-9.]*)", text or "")
    return m.group(1) if m else None


PACKAGE_VERSION = _package_version()


def candidates():
    """[(path, where)] in the order they are tried: $FASTLOAD_LIBRARY alone when it is set (an
    explicit choice is not second-guessed), else the library inside the package (pip install),
    then, for python/fastload of a source checkout only, the build tree: $FL_BINARY_DIR or build/."""
    env = os.environ.get(LIB_ENV)
    if env:
        return [(env, "$" + LIB_ENV)]
    out = [(os.path.join(_HERE, "libfastload.so"), "inside the package")]
    if _source_checkout() is not None:
        bindir = os.environ.get("FL_BINARY_DIR")
        if bindir:
            out.append((os.path.join(bindir, "libfastload.so"), "build tree ($FL_BINARY_DIR)"))
        else:
            out.append((os.path.join(_REPO, "build", "libfastload.so"), "build tree (build/)"))
    return out


def find_library():
    """(path, where) of the libfastload to load, or (None, None); see candidates()."""
    for path, where in candidates():
        if where.startswith("$") or os.path.exists(path):
            return path, where
    return None, None


def check_abi(L, path):
    """Refuse a library whose version or struct sizes differ from what this module declares."""
    ours = "fastload Python package " + (PACKAGE_VERSION or "(version unknown)")
    try:
        fn = L.fl_abi_info_get
    except AttributeError:
        raise ImportError(f"fastload: {path} has no fl_abi_info_get: it was built from an older "
                          f"fastload than the {ours}; rebuild it, or reinstall the package "
                          f"(pip install ./python)") from None
    fn.restype = ctypes.POINTER(fl_abi_info)
    fn.argtypes = []
    info = fn().contents
    theirs = (info.version or b"?").decode("utf-8", "replace")
    problems = []
    if PACKAGE_VERSION is not None and theirs != PACKAGE_VERSION:
        problems.append(f"version {theirs} != {PACKAGE_VERSION}")
    if info.abi_version != ABI_VERSION:
        problems.append(f"ABI version {info.abi_version} != {ABI_VERSION}")
    for field, struct in (("sizeof_error", fl_error), ("sizeof_loader_options", fl_loader_options),
                          ("sizeof_batch", fl_batch), ("sizeof_loader_stats", fl_loader_stats),
                          ("sizeof_batch_field", fl_batch_field)):
        if getattr(info, field) != ctypes.sizeof(struct):
            problems.append(f"sizeof({struct.__name__}) {getattr(info, field)} != "
                            f"{ctypes.sizeof(struct)}")
    if problems:
        raise ImportError(f"fastload: libfastload {theirs} at {path} does not match the {ours} "
                          f"({'; '.join(problems)}; library first, package second): rebuild the "
                          f"library and the package from the same checkout")
    return theirs


_lib = None
_lib_path = None
_lib_where = None


def lib():
    """The loaded library (loaded, ABI-checked and declared on first use)."""
    global _lib, _lib_path, _lib_where
    if _lib is not None:
        return _lib
    path, where = find_library()
    if path is None:
        tried = ", ".join(f"{p} ({w})" for p, w in candidates())
        raise OSError("fastload: libfastload.so not found. Install the package with "
                          "`/usr/bin/python3 -m pip install --no-build-isolation --no-index ./python` "
                          "(it builds the library into the package), or in a source checkout build "
                          "it (cmake -B build && cmake --build build), or set " + LIB_ENV +
                          ". Tried: " + tried)
    try:
        L = ctypes.CDLL(path)
    except OSError as e:
        raise OSError(f"fastload: cannot load {path} ({where}): {e}") from None
    check_abi(L, path)
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
    L.fl_loader_prefetch.restype = ctypes.c_uint32
    L.fl_loader_prefetch.argtypes = [ctypes.c_void_p]
    if hasattr(L, "fl_loader_set_workers"):  # newer libraries only, as below
        L.fl_loader_workers.restype = ctypes.c_uint32
        L.fl_loader_workers.argtypes = [ctypes.c_void_p]
        L.fl_loader_set_workers.restype = ctypes.c_int
        L.fl_loader_set_workers.argtypes = [ctypes.c_void_p, ctypes.c_uint32,
                                            ctypes.POINTER(fl_error)]
    L.fl_loader_stats_get.restype = None
    L.fl_loader_stats_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    # newer libraries only (hasattr: the binding still loads an older libfastload)
    if hasattr(L, "fl_loader_io_describe"):
        L.fl_loader_io_describe.restype = ctypes.c_char_p
        L.fl_loader_io_describe.argtypes = [ctypes.c_void_p]
        L.fl_loader_direct.restype = ctypes.c_int
        L.fl_loader_direct.argtypes = [ctypes.c_void_p]
    L.fl_loader_dataset.restype = ctypes.c_void_p
    L.fl_loader_dataset.argtypes = [ctypes.c_void_p]
    L.fl_loader_close.restype = None
    L.fl_loader_close.argtypes = [ctypes.c_void_p]
    L.fl_dataset_count.restype = ctypes.c_uint64
    L.fl_dataset_count.argtypes = [ctypes.c_void_p]
    # optional accessors (a mock or an older library may lack them)
    for name, res, args in (("fl_dataset_open_summary", ctypes.c_int,
                             [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(fl_error)]),
                            ("fl_dataset_close", None, [ctypes.c_void_p]),
                            ("fl_dataset_num_classes", ctypes.c_uint32, [ctypes.c_void_p]),
                            ("fl_dataset_class_name", ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_uint32])):
        try:
            fn = getattr(L, name)
            fn.restype, fn.argtypes = res, args
        except AttributeError:
            pass
    _lib, _lib_path, _lib_where = L, path, where
    return L


def library_path() -> str:
    """Path of the loaded libfastload (loads it if needed)."""
    lib()
    return _lib_path


def library_origin() -> str:
    """Where the loaded libfastload was found: "inside the package", "build tree (build/)",
    "build tree ($FL_BINARY_DIR)" or "$FASTLOAD_LIBRARY" (loads it if needed)."""
    lib()
    return _lib_where
