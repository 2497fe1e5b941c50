#!/usr/bin/env bash
# fetch_gpu_deps.sh — download (never install) the Debian packages fastload builds against, so a
# machine without network or these -dev packages (the lent GPU machine) can build it: run here,
# carry .deps/debs along, and scripts/unpack_deps.sh (called by tests/gpu/check.sh) unpacks them
# into a private prefix with dpkg -x. Idempotent; uses apt-get download (the ordinary client).
# Usage: scripts/fetch_gpu_deps.sh [DEST]   (default DEST: .deps/debs in the repository root)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.deps/debs}"
# build + run time: headers, .pc files, .so links (-dev) and the shared libraries themselves
pkgs=(
  libzstd-dev libzstd1
  liblmdb-dev liblmdb0
  liburing-dev liburing2
  libturbojpeg0-dev libturbojpeg0
  libjpeg62-turbo-dev libjpeg62-turbo
  libpng-dev libpng16-16
  zlib1g-dev zlib1g
  libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0
  libprotobuf-c-dev libprotobuf-c1   # trainfast export (ONNX; schema code: trainer/onnx_gen)
  pkgconf pkgconf-bin libpkgconf3 make   # tools the GPU machine may lack
)
command -v apt-get >/dev/null || { echo "fetch_gpu_deps.sh: apt-get not found (Debian/Ubuntu only)" >&2; exit 1; }
mkdir -p "$dest"
cd "$dest"
missing=()
for p in "${pkgs[@]}"; do
    compgen -G "${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "fetch_gpu_deps: downloading ${#missing[@]} packages into $dest"
    if ! apt-get download "${missing[@]}" 2>"$dest/.apt.err"; then
        echo "fetch_gpu_deps: apt-get download failed (run 'apt-get update' first?):" >&2
        cat "$dest/.apt.err" >&2
        exit 1
    fi
    rm -f "$dest/.apt.err"
fi
ls -1 "$dest"/*.deb | sed 's|.*/||' > "$dest/PACKAGES"
du -sh "$dest" | awk '{print "fetch_gpu_deps: " $1 " of packages in '"$dest"'"}'
