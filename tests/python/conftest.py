"""conftest.py — pytest fixtures of the Python binding tests: the fixture datasets made by
fl_py_make_dataset (FL_MAKE_DATASET, set by CTest) in a temp dir, once per session."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

COUNT, H, W, K = 100, 6, 8, 4
MAKER = os.environ.get("FL_MAKE_DATASET")


def make(path, *args):
    r = subprocess.run([MAKER, path, "--count", str(COUNT), "--height", str(H), "--width", str(W),
                        "--classes", str(K), *args], capture_output=True, text=True)
    assert r.returncode == 0, f"fixture maker failed: {r.stderr}"
    return r.stdout


@pytest.fixture(scope="session")
def datasets(tmp_path_factory):
    """(tmp dir, clean dataset, dataset with record 5 corrupt, the corrupt shard's file name)."""
    if not MAKER or not os.path.exists(MAKER):
        pytest.skip("FL_MAKE_DATASET (the fixture maker) is not set")
    tmp = str(tmp_path_factory.mktemp("fl-py"))
    ds = os.path.join(tmp, "ds")
    make(ds)
    bad = os.path.join(tmp, "bad")
    make(bad)
    out = make(bad, "--corrupt", "5")
    return tmp, ds, bad, os.path.basename(out.split()[0])


@pytest.fixture(scope="session")
def ds(datasets):
    return datasets[1]
