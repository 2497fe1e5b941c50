# lib.sh — shared setup for the packdata shell tests: tool paths, a temp dir with fixtures,
# and small assertion helpers. Sourced by test_*.sh; exits 77 (skip) when the tools are missing.
set -u
B="${FL_BINARY_DIR:?FL_BINARY_DIR not set (run through ctest)}"
P="$B/tools/packdata/packdata"
FIX="$B/tests/packdata/pd_fixture"
for t in "$P" "$FIX"; do
    [[ -x "$t" ]] || { echo "SKIP: $t not built"; exit 77; }
done
T="$(mktemp -d "${TMPDIR:-/tmp}/packdata-test.XXXXXX")"
trap 'rm -rf "$T"' EXIT
# sanitizer reports must not look like packdata exit status 1 (data error)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:exitcode=86"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1:exitcode=86"
"$FIX" make "$T/fx" >/dev/null || { echo "FAIL: fixture generation"; exit 1; }
FX="$T/fx"
failures=0
# Tests here compare packs byte for byte across runs: give every pack the same dataset id (the
# writer picks a random one otherwise). Tests about dataset ids unset it.
export FL_DATASET_ID=0123456789abcdef0123456789abcdef

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

. "$(dirname "${BASH_SOURCE[0]}")/../lib/expect.sh"

finish() {
    if [[ $failures -ne 0 ]]; then
        echo "$failures failure(s)"
        exit 1
    fi
    echo "all passed"
    exit 0
}
