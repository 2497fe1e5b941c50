#!/usr/bin/python3
"""lmdb_writer.py — the peer for `packdata pack --encode keep`: a plain Python LMDB writer (Debian's
python3-lmdb) that puts each file's bytes under its index, the way convert_imageset-style scripts
do (no checksums, no decoding). Usage: /usr/bin/python3 bench/lmdb_writer.py SRC_DIR DST_DIR"""
import os
import sys

import lmdb


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    files = []
    for cls in sorted(os.listdir(src)):
        d = os.path.join(src, cls)
        if os.path.isdir(d):
            files += [(os.path.join(d, f), cls) for f in sorted(os.listdir(d))]
    total = sum(os.path.getsize(f) for f, _ in files)
    env = lmdb.open(dst, map_size=max(1 << 26, total * 2))
    with env.begin(write=True) as txn:
        for i, (path, cls) in enumerate(files):
            with open(path, "rb") as f:
                txn.put(b"%08d" % i, f.read())
    env.sync()
    env.close()


if __name__ == "__main__":
    main()
