#!/usr/bin/env bash
# test_install.sh — `cmake --install` gives other projects what they need: the tools run from the
# prefix, and a program links libfastload through pkg-config and through find_package(fastload)
# and runs (with an rpath, or LD_LIBRARY_PATH: without either it cannot find libfastload.so.0 in a
# prefix outside the system's library path).
set -u
B="${FL_BINARY_DIR:?run through ctest}"
S="${FL_SOURCE_DIR:?run through ctest}"
T="$(mktemp -d "${TMPDIR:-/tmp}/install-test.XXXXXX")"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake --install "$B" --prefix "$T/prefix" >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "cmake --install"; }
for f in bin/packdata bin/fastload bin/trainfast include/fastload/fastload.h lib/pkgconfig/fastload.pc \
         lib/cmake/fastload/fastloadConfig.cmake include/fastload/fl_version.h; do
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
# the same program built without an rpath: the loader cannot find libfastload.so.0 in a prefix
# outside its search path (the README's "Linking against libfastload" says so), and runs with
# LD_LIBRARY_PATH=PREFIX/lib
cc "$S/tests/install/consumer.c" -o "$T/c0" $(pkg-config --cflags --libs fastload) || fail "build without rpath"
if ldconfig -p 2>/dev/null | grep -q 'libfastload\.so\.0 '; then
    echo "note: a libfastload.so.0 is installed system-wide (ldconfig -p): the no-rpath failure is not checked"
elif env -u LD_LIBRARY_PATH "$T/c0" "$T/ds" >"$T/c0.out" 2>&1; then
    fail "a program without rpath ran against a non-system prefix: the README's explanation is wrong"
else
    grep -q "libfastload.so.0: cannot open shared object file" "$T/c0.out" || { cat "$T/c0.out"; fail "unexpected error without rpath"; }
fi
out=$(LD_LIBRARY_PATH="$T/prefix/lib" "$T/c0" "$T/ds") || fail "consumer with LD_LIBRARY_PATH"
[[ "$out" == *" 2" ]] || fail "LD_LIBRARY_PATH consumer printed '$out'"
# the rpath build, moved elsewhere, still runs (the rpath is absolute: PREFIX/lib)
mkdir -p "$T/elsewhere" && cp "$T/c1" "$T/elsewhere/c1"
out=$(cd / && env -u LD_LIBRARY_PATH "$T/elsewhere/c1" "$T/ds") || fail "rpath consumer run from elsewhere"
[[ "$out" == *" 2" ]] || fail "moved rpath consumer printed '$out'"
# pkg-config reports the installed version, the one of CMakeLists.txt's project()
want=$(sed -nE 's/^project\(fastload VERSION ([0-9.]+).*/\1/p' "$S/CMakeLists.txt")
[[ "$(pkg-config --modversion fastload)" == "$want" ]] || fail "fastload.pc version $(pkg-config --modversion fastload) != $want"
[[ "$out" == "$want "* ]] || fail "fl_version() printed '${out%% *}', CMakeLists.txt says $want"
grep -q "define FASTLOAD_VERSION \"$want\"" "$T/prefix/include/fastload/fl_version.h" || fail "installed fl_version.h"
# CMake consumer
mkdir -p "$T/proj"
cat >"$T/proj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.22)
project(consumer C)
find_package(fastload REQUIRED)
add_executable(c2 $S/tests/install/consumer.c)
target_link_libraries(c2 PRIVATE fastload::fastload)
CM
cmake -S "$T/proj" -B "$T/proj/b" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/cm.log" 2>&1 \
    || { cat "$T/cm.log"; fail "find_package(fastload)"; }
cmake --build "$T/proj/b" >"$T/cb.log" 2>&1 || { cat "$T/cb.log"; fail "build with find_package"; }
out=$(env -u LD_LIBRARY_PATH "$T/proj/b/c2" "$T/ds") || fail "cmake consumer run (find_package gives the build tree an rpath)"
[[ "$out" == *" 2" ]] || fail "cmake consumer printed '$out'"
echo "ok: installed tools, pkg-config and CMake package work"
