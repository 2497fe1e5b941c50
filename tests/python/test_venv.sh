#!/usr/bin/env bash
# test_venv.sh — the Python package as a user installs it: into a fresh venv
# (`/usr/bin/python3 -m venv --system-site-packages`), offline, with Debian's pip/setuptools/wheel:
#   1. VENV/bin/pip install --no-build-isolation --no-index ./python  (builds libfastload with CMake
#      into a fresh build tree, installs it inside the package)
#   2. pip wheel of the same, installed into a second venv (the wheel route)
# and from a directory outside the checkout, with no PYTHONPATH / FASTLOAD_LIBRARY: the package and
# its library come from the venv, the version is CMakeLists.txt's, an ABI mismatch is refused
# naming both sides, and the README's Python snippet (the block after the marker
# "run by tests/python/test_venv.sh") runs on a small dataset at the path it names.
# Skips (77) only when venv, pip, setuptools or wheel are missing (scripts/setup.sh installs them).
set -u
S="${FL_SOURCE_DIR:?run through ctest}"
MAKER="${FL_MAKE_DATASET:?run through ctest}"
PY=/usr/bin/python3
fail() { echo "FAIL: $*"; exit 1; }
"$PY" -c "import ensurepip, venv" 2>/dev/null || { echo "SKIP: python3-venv missing"; exit 77; }
"$PY" -m pip --version >/dev/null 2>&1 || { echo "SKIP: python3-pip missing"; exit 77; }
"$PY" -c "import setuptools, wheel" 2>/dev/null || { echo "SKIP: python3-setuptools / python3-wheel missing"; exit 77; }
T="$(mktemp -d "${TMPDIR:-/tmp}/venv-test.XXXXXX")"
trap 'rm -rf "$T"' EXIT
unset PYTHONPATH FASTLOAD_LIBRARY FL_BINARY_DIR LD_PRELOAD
want=$(sed -nE 's/^project\(fastload VERSION ([0-9.]+).*/\1/p' "$S/CMakeLists.txt")
[[ -n "$want" ]] || fail "no version in CMakeLists.txt"
export FASTLOAD_CMAKE_BUILD_DIR="$T/cmake"   # a fresh CMake build tree (python/setup.py)
t0=$SECONDS

"$PY" -m venv --system-site-packages "$T/venv" || fail "python3 -m venv"
"$T/venv/bin/pip" install --no-build-isolation --no-index "$S/python" >"$T/pip.log" 2>&1 \
    || { tail -40 "$T/pip.log"; fail "pip install ./python"; }
"$T/venv/bin/pip" wheel --no-build-isolation --no-index --no-deps -w "$T/dist" "$S/python" >"$T/wheel.log" 2>&1 \
    || { tail -40 "$T/wheel.log"; fail "pip wheel ./python"; }
whl=$(ls "$T"/dist/fastload-"$want"-py3-none-linux_*.whl 2>/dev/null) || fail "no py3-none-linux wheel of $want in $T/dist: $(ls "$T/dist")"
"$PY" -m venv --system-site-packages "$T/venv2" || fail "second venv"
"$T/venv2/bin/pip" install --no-index "$whl" >"$T/pip2.log" 2>&1 || { tail -20 "$T/pip2.log"; fail "pip install the wheel"; }
echo "installed in $((SECONDS - t0)) s"

mkdir -p "$T/elsewhere/samples/fashion-mnist/packed"
"$MAKER" "$T/elsewhere/samples/fashion-mnist/packed/train" --count 1024 --height 28 --width 28 --classes 10 \
    >/dev/null || fail "make dataset"
cd "$T/elsewhere" || fail "cd"
for v in venv venv2; do
    "$T/$v/bin/python" - "$T/$v" "$want" <<'PY' || fail "$v: package checks"
import sys, fastload, fastload._native as n
venv, want = sys.argv[1], sys.argv[2]
assert fastload.__file__.startswith(venv + "/"), f"fastload imported from {fastload.__file__}, not {venv}"
assert n.library_origin() == "inside the package", n.library_origin()
assert fastload.library_path().startswith(venv + "/"), fastload.library_path()
assert fastload.__version__ == want == fastload.version(), (fastload.__version__, want, fastload.version())
import os
assert os.path.exists(os.path.join(os.path.dirname(fastload.__file__), "py.typed")), "py.typed not installed"
print(f"{venv}: fastload {fastload.__version__} from {fastload.library_path()}")
PY
done
# an ABI mismatch is refused, naming the library's and the package's side
"$T/venv/bin/python" - <<'PY' || fail "ABI mismatch check"
import ctypes, fastload._native as n
n.PACKAGE_VERSION = "9.9.9"
class fl_batch(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint64)]
n.fl_batch = fl_batch
try:
    n.lib()
except ImportError as e:
    msg = str(e)
    for part in ("9.9.9", "sizeof(fl_batch) ", "!= 8", "site-packages/fastload/libfastload.so"):
        assert part in msg, (part, msg)
    print("refused:", msg)
else:
    raise SystemExit("a mismatched library was loaded")
PY
# the README's Python snippet, as written
awk '/run by tests\/python\/test_venv.sh/ {m=1; next} m && /^```python/ {p=1; next} p && /^```/ {exit} p' \
    "$S/README.md" >snippet.py
[[ -s snippet.py ]] || fail "no Python snippet after the marker in README.md"
# run as written, then check that it went through one epoch (1024 samples: 4 batches of 256)
"$T/venv/bin/python" -c 'exec(compile(open("snippet.py").read(), "README snippet", "exec"))
assert images.shape[0] == 256 and labels.shape == (256,), (images.shape, labels.shape)
assert state["epoch"] == 1 and state["batch"] == 0, state
print("snippet state:", state)' >snippet.out 2>&1 || { cat snippet.py snippet.out; fail "README snippet"; }
cat snippet.out
echo "ok: pip install, pip wheel, import from outside the checkout, ABI check, README snippet ($((SECONDS - t0)) s)"
