#!/usr/bin/env bash
# unpack_deps.sh — unpack the .deb files from scripts/fetch_gpu_deps.sh into a private prefix with
# dpkg -x (no root, no install scripts), then make it usable by CMake/pkg-config: .pc files are
# rewritten to point into the prefix, and the alternatives links dpkg would have made for OpenBLAS
# are created by hand. Prints the prefix's environment (source it, or use tests/gpu/check.sh).
# Usage: scripts/unpack_deps.sh [DEBS_DIR] [PREFIX]   (defaults: .deps/debs, .deps/root)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
debs="${1:-$root/.deps/debs}"
prefix="${2:-$root/.deps/root}"
compgen -G "$debs/*.deb" >/dev/null || { echo "unpack_deps.sh: no .deb files in $debs (run scripts/fetch_gpu_deps.sh where there is network)" >&2; exit 1; }
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
# the stamp names the prefix and the packages: a prefix unpacked elsewhere (carried from another
# machine: stale absolute paths) or from another package set is unpacked again
stamp="$(echo "$prefix"; cd "$debs" && ls -1 *.deb)"
if [[ -f "$prefix/.unpacked" && "$(cat "$prefix/.unpacked")" != "$stamp" ]]; then
    echo "unpack_deps: $prefix is stale (other path or package set); unpacking again" >&2
    find "$prefix" -mindepth 1 -delete
fi
if [[ ! -f "$prefix/.unpacked" ]]; then
    for d in "$debs"/*.deb; do
        if command -v dpkg-deb >/dev/null; then
            dpkg-deb -x "$d" "$prefix"
        else  # no dpkg: a .deb is an ar archive holding data.tar.*
            tmp="$(mktemp -d)"
            (cd "$tmp" && ar x "$d" && tar -xf data.tar.* -C "$prefix")
            rm -rf "$tmp"
        fi
    done
    lib="$prefix/usr/lib/x86_64-linux-gnu"
    # OpenBLAS: Debian exposes it through update-alternatives links made at install time
    ob="$lib/openblas-pthread"
    if [[ -d "$ob" ]]; then
        mkdir -p "$lib/pkgconfig"
        [[ -f "$ob/pkgconfig/openblas.pc" ]] && cp "$ob/pkgconfig/openblas.pc" "$lib/pkgconfig/openblas.pc"
        for so in libopenblas.so.0 libblas.so.3 liblapack.so.3; do
            [[ -e "$ob/$so" && ! -e "$lib/$so" ]] && ln -s "openblas-pthread/$so" "$lib/$so"
        done
    fi
    # .pc files say prefix=/usr: point every path into the private prefix
    find "$prefix" -name '*.pc' -print0 | while IFS= read -r -d '' pc; do
        sed -i -E "s#^(prefix|exec_prefix|libdir|includedir|sharedlibdir)=/usr#\1=$prefix/usr#" "$pc"
    done
    # absolute symlinks (rare in -dev packages) would point at the host's /usr: re-root them
    find "$prefix" -type l -lname '/*' -print0 | while IFS= read -r -d '' l; do
        t="$(readlink "$l")"
        [[ -e "$prefix$t" ]] && ln -sfn "$prefix$t" "$l"
    done
    echo "$stamp" > "$prefix/.unpacked"
fi
lib="$prefix/usr/lib/x86_64-linux-gnu"
echo "export PKG_CONFIG_PATH=\"$lib/pkgconfig:$prefix/usr/share/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}\""
echo "export CMAKE_PREFIX_PATH=\"$prefix/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}\""
echo "export LIBRARY_PATH=\"$lib:$prefix/lib/x86_64-linux-gnu\${LIBRARY_PATH:+:\$LIBRARY_PATH}\""
echo "export LD_LIBRARY_PATH=\"$lib:$lib/openblas-pthread:$prefix/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
echo "export PATH=\"\$PATH:$prefix/usr/bin\""   # system tools first; ours (pkg-config, make) only when missing
echo "export CPATH=\"$prefix/usr/include:$prefix/usr/include/x86_64-linux-gnu\${CPATH:+:\$CPATH}\""
