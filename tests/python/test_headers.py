"""test_headers.py — the Python binding's copies of C constants agree with the C headers: every
enumerator of common/fl_error.h (FL_E_*), loader/fastload.h (fl_order, fl_augment, fl_io_mode,
fl_on_corrupt, FL_ABI_VERSION), formats/fl_dataset.h (fl_encoding, fl_compression, fl_backend),
formats/fl_fields.h (fl_field_type, fl_dtype, fl_mask_codec, FL_MAX_DIMS) and imaging/fl_image.h
(FL_DECODE_FAST) has its Python value, and no Python value is missing from C. The headers are
parsed as text; no library is loaded."""
import os
import re

import pytest

from fastload import _native, errors

ROOT = os.environ.get("FL_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..")


def header(rel):
    path = os.path.join(ROOT, rel)
    if not os.path.exists(path):
        pytest.skip(f"{rel} not found (FL_SOURCE_DIR={ROOT})")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)  # comments may hold '=' and names
    return re.sub(r"//[^\n]*", " ", text)


def enum(text, name):
    """{ENUMERATOR: value} of `typedef enum name { ... }`."""
    m = re.search(r"typedef\s+enum\s+" + name + r"\s*\{(.*?)\}", text, flags=re.S)
    assert m, f"enum {name} not found"
    out, last = {}, -1
    for item in m.group(1).split(","):
        item = item.strip()
        if not item:
            continue
        k, _, v = (p.strip() for p in item.partition("="))
        last = int(v, 0) if v else last + 1
        out[k] = last
    return out


def define(text, name):
    m = re.search(r"#define\s+" + name + r"\s+\(?(-?\d+)\)?", text)
    assert m, f"#define {name} not found"
    return int(m.group(1))


def check(c, py, prefix, alias=None):
    """C enumerators PREFIX_NAME -> value against the Python table {name: value}."""
    alias = alias or {}
    want = {alias.get(k[len(prefix):].lower(), k[len(prefix):].lower()): v for k, v in c.items()}
    for name, v in want.items():
        assert name in py, f"{prefix}{name.upper()} = {v} has no Python value"
        assert py[name] == v, f"{prefix}{name.upper()}: C {v}, Python {py[name]}"
    stray = {v for v in py.values()} - set(want.values())
    assert not stray, f"Python values {stray} are not in the C enum ({prefix}*)"


def test_error_codes():
    codes = {k: int(v) for k, v in re.findall(r"\b(FL_E_[A-Z_]+)\s*=\s*(-?\d+)",
                                              header("common/fl_error.h"))}
    assert len(codes) > 10, f"FL_E_ codes not found: {codes}"
    for k, v in codes.items():
        if k == "FL_E_LAST":
            continue
        assert hasattr(errors, k), f"{k} = {v} missing from fastload.errors"
        assert getattr(errors, k) == v, f"{k}: C {v}, Python {getattr(errors, k)}"
    py = {k for k in dir(errors) if k.startswith("FL_E_")}
    assert py <= set(codes), py - set(codes)


def test_loader_enums():
    text = header("loader/fastload.h")
    check(enum(text, "fl_order"), _native.ORDER, "FL_ORDER_", {"sequential": "seq"})
    check(enum(text, "fl_augment"), _native.AUGMENT, "FL_AUG_")
    check(enum(text, "fl_io_mode"), _native.IO, "FL_IO_")
    check(enum(text, "fl_on_corrupt"), _native.ON_CORRUPT, "FL_CORRUPT_")
    assert define(text, "FL_ABI_VERSION") == _native.ABI_VERSION


def test_dataset_enums():
    text = header("formats/fl_dataset.h")
    check(enum(text, "fl_encoding"), _native.ENCODING, "FL_ENC_")
    check(enum(text, "fl_compression"), _native.COMPRESSION, "FL_COMP_")
    check(enum(text, "fl_backend"), _native.BACKEND, "FL_BACKEND_")


def test_fields_enums():
    text = header("formats/fl_fields.h")
    check(enum(text, "fl_field_type"), _native.FIELD_TYPE, "FL_FIELD_")
    dt = enum(text, "fl_dtype")
    names = {"U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16", "I32": "int32",
             "I64": "int64", "F16": "float16", "F32": "float32", "F64": "float64"}
    check(dt, _native.DTYPE, "FL_DTYPE_", {k.lower(): v for k, v in names.items()})
    check(enum(text, "fl_mask_codec"), _native.MASK_CODEC, "FL_MASK_")
    assert define(text, "FL_MAX_DIMS") == _native.MAX_DIMS


def test_decode_flags():
    text = header("imaging/fl_image.h")
    m = re.search(r"\bFL_DECODE_FAST\s*=\s*(\d+)", text)
    assert m and int(m.group(1)) == _native.DECODE["fast"]
