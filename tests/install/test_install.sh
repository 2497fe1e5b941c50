#!/usr/bin/env bash
# test_install.sh — `cmake --install` gives other projects what they need: the tools run from the
# prefix, and a program links libfastload through pkg-config and through find_package(fastload).
set -u
B="${FL_BINARY_DIR:?run through ctest}"
S="${FL_SOURCE_DIR:?run through ctest}"
T="$(mktemp -d "${TMPDIR:-/tmp}/install-test.XXXXXX")"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake --install "$B" --prefix "$T/prefix" >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "cmake --install"; }
for f in bin/packdata bin/fastload bin/trainfast include/fastload/fastload.h lib/pkgconfig/fastload.pc \
         lib/cmake/fastload/fastloadConfig.cmake lib/python3/dist-packages/fastload/__init__.py; do
    [[ -e "$T/prefix/$f" ]] || fail "$f not installed"
done
"$T/prefix/bin/packdata" --version >/dev/null || fail "installed packdata does not run"
# a tiny dataset to open
printf '\0\0\x08\x03\0\0\0\x02\0\0\0\x02\0\0\0\x02' >"$T/img"; printf '\1\2\3\4\5\6\7\x08' >>"$T/img"
printf '\0\0\x08\x01\0\0\0\x02\1\0' >"$T/lab"
"$T/prefix/bin/packdata" pack --idx "$T/img" "$T/lab" "$T/ds" --quiet 2>"$T/err" || { cat "$T/err"; fail "pack"; }
# pkg-config consumer
export PKG_CONFIG_PATH="$T/prefix/lib/pkgconfig"
cc "$S/tests/install/consumer.c" -o "$T/c1" $(pkg-config --cflags --libs fastload) -Wl,-rpath,"$T/prefix/lib" \
    || fail "build with pkg-config"
out=$("$T/c1" "$T/ds") || fail "pkg-config consumer run"
[[ "$out" == *" 2" ]] || fail "pkg-config consumer printed '$out'"
# CMake consumer
mkdir -p "$T/proj"
cat >"$T/proj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.22)
project(consumer C)
find_package(fastload REQUIRED)
add_executable(c2 $S/tests/install/consumer.c)
target_link_libraries(c2 PRIVATE fastload::fastload)
CM
cmake -S "$T/proj" -B "$T/proj/b" -DCMAKE_PREFIX_PATH="$T/prefix" -DCMAKE_BUILD_RPATH="$T/prefix/lib" >"$T/cm.log" 2>&1 \
    || { cat "$T/cm.log"; fail "find_package(fastload)"; }
cmake --build "$T/proj/b" >"$T/cb.log" 2>&1 || { cat "$T/cb.log"; fail "build with find_package"; }
out=$("$T/proj/b/c2" "$T/ds") || fail "cmake consumer run"
[[ "$out" == *" 2" ]] || fail "cmake consumer printed '$out'"
echo "ok: installed tools, pkg-config and CMake package work"
