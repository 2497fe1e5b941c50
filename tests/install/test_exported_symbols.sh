#!/usr/bin/env bash
# test_exported_symbols.sh LIB HEADER... — libfastload.so exports exactly the functions its public
# headers declare: every exported (nm -D --defined-only) symbol is declared in a public header, and
# every function a public header declares is exported. The declarations are read here with grep,
# not with the CMake code that writes the version script, so a slip in either shows.
set -u
lib="${1:?usage: test_exported_symbols.sh LIB HEADER...}"
shift
fail() { echo "FAIL: $*"; exit 1; }
command -v nm >/dev/null || { echo "SKIP: nm not found"; exit 77; }
[[ -f "$lib" ]] || fail "$lib not built"
T="$(mktemp -d "${TMPDIR:-/tmp}/symbols-test.XXXXXX")"
trap 'rm -rf "$T"' EXIT

# declared: a line at column 0, not a typedef/static/preprocessor line, naming an fl_ function
for h in "$@"; do
    [[ -f "$h" ]] || fail "public header $h missing"
    grep -vE '^(typedef|static|#|extern)' "$h" |
        grep -oE '^([A-Za-z_][^;{}()=]*[ *])?fl_[a-z0-9_]+ *\(' |
        grep -oE 'fl_[a-z0-9_]+ *\($' | tr -d ' ('
done | sort -u >"$T/declared"

# exported: defined dynamic symbols, less the version node (type A)
nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort -u >"$T/exported"

n_decl=$(wc -l <"$T/declared")
n_exp=$(wc -l <"$T/exported")
[[ $n_decl -gt 20 ]] || fail "only $n_decl declarations found in $*"
comm -13 "$T/declared" "$T/exported" >"$T/extra"
comm -23 "$T/declared" "$T/exported" >"$T/missing"
if [[ -s "$T/extra" ]]; then
    echo "exported but not declared in a public header ($(wc -l <"$T/extra")):"
    sed 's/^/  /' "$T/extra" | head -50
fi
if [[ -s "$T/missing" ]]; then
    echo "declared in a public header but not exported ($(wc -l <"$T/missing")):"
    sed 's/^/  /' "$T/missing"
fi
[[ -s "$T/extra" || -s "$T/missing" ]] && fail "libfastload.so's exports differ from its public headers"
# every export carries the version node of the map
if nm -D --defined-only --with-symbol-versions "$lib" >/dev/null 2>&1; then
    unversioned=$(nm -D --defined-only --with-symbol-versions "$lib" | awk '$2 != "A" && $3 !~ /@@?FASTLOAD_0$/' | wc -l)
    [[ $unversioned -eq 0 ]] || fail "$unversioned exported symbols without the FASTLOAD_0 version"
fi
echo "ok: $n_exp exported symbols = the $n_decl functions of the public headers"
