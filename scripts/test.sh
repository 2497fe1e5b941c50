#!/usr/bin/env bash
# test.sh — the project's test command: builds and runs the CTest suite three ways
#   1. build/        Release (with the CUDA backend compiled when nvcc is there; GPU tests skip without a GPU)
#   2. build-asan/   AddressSanitizer + UndefinedBehaviorSanitizer, CPU-only
#   3. build-fuzz/   clang libFuzzer harnesses, each run for a bounded time (FUZZ_SECONDS, default 15)
# and ends with one line "N passed, N failed, N skipped".
# Usage: scripts/test.sh [--fast] [--quick] [--long] [--tsan]
#   --fast   only the Release build and only the fast tier (ctest -L fast: under a minute);
#   --quick  only the Release build;  --long  longer fuzzing (300 s each) and the soak tests;
#   --tsan   also the ThreadSanitizer build of the loader tests.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
quick=0 long=0 tsan=0 fast=0
for arg in "$@"; do
    case "$arg" in
        --fast) fast=1 quick=1 ;;
        --quick) quick=1 ;;
        --long) long=1 ;;
        --tsan) tsan=1 ;;
        -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "test.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    esac
done
jobs=$(nproc)
fuzz_seconds=${FUZZ_SECONDS:-15}
((long)) && fuzz_seconds=300
export FL_LONG_TESTS=$long
passed=0 failed=0 skipped=0 status=0

# run_suite NAME BUILD_DIR CTEST_ARGS -- CMAKE_ARGS...
run_suite() {
    local name=$1 dir=$2 ctest_args=$3
    shift 4
    echo "=== $name: configure + build ($dir)"
    if ! cmake -S "$root" -B "$dir" "$@" >"$dir.configure.log" 2>&1; then
        cat "$dir.configure.log"; echo "=== $name: configure FAILED"; failed=$((failed + 1)); status=1; return
    fi
    grep -E '^-- (fastload|  )' "$dir.configure.log" || true
    if ! cmake --build "$dir" -j"$jobs" >"$dir.build.log" 2>&1; then
        tail -60 "$dir.build.log"; echo "=== $name: build FAILED"; failed=$((failed + 1)); status=1; return
    fi
    echo "=== $name: ctest"
    local out
    out=$(cd "$dir" && ctest --output-on-failure -j"$jobs" $ctest_args 2>&1)
    local rc=$?
    echo "$out"
    local line total f s
    line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' <<<"$out" | tail -1)
    if [[ -n "$line" ]]; then
        total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
        f=$(sed -E 's/.*tests passed, ([0-9]+) tests failed.*/\1/' <<<"$line")
        s=$(grep -cE '\*\*\*Skipped|Not Run' <<<"$out")
        passed=$((passed + total - f - s)); failed=$((failed + f)); skipped=$((skipped + s))
    fi
    ((rc != 0)) && status=1
}

if ((fast)); then
    run_suite "release, fast tier" "$root/build" "-L ^fast$" -- -DCMAKE_BUILD_TYPE=Release -DFL_CUDA=AUTO
else
    run_suite "release" "$root/build" "-LE ^fuzz$" -- -DCMAKE_BUILD_TYPE=Release -DFL_CUDA=AUTO
fi
if ((!quick)); then
    run_suite "asan+ubsan" "$root/build-asan" "-LE ^fuzz$" -- -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFL_SANITIZE=ON -DFL_CUDA=OFF
    if command -v clang >/dev/null; then
        run_suite "fuzz (${fuzz_seconds}s each)" "$root/build-fuzz" "-L ^fuzz$" -- -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DFL_FUZZ=ON -DFL_FUZZ_SECONDS="$fuzz_seconds"
    else
        echo "=== fuzz: clang not found, skipped (scripts/setup.sh installs it)"
    fi
fi
if ((tsan)); then
    run_suite "tsan" "$root/build-tsan" "-R ^(test_loader_|formats_threads)" -- -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFL_TSAN=ON -DFL_CUDA=OFF
fi
echo "test: $passed passed, $failed failed, $skipped skipped"
exit $status
