#!/usr/bin/env bash
# fuzz.sh — run every libFuzzer harness (tests/fuzz/fuzz_*.c) for as long as asked, one after
# the other (or each with N forked workers), in the clang FL_FUZZ=ON build, then list what they
# found. Each harness keeps a growing working corpus next to its binary (corpus-<name>/) and
# also reads the seed corpus tests/fuzz/corpus/<name>/; anything it finds is written to
# findings-<name>/ there (crash-*, leak-*, timeout-*, oom-*).
# Usage: scripts/fuzz.sh [SECONDS] [NAME...] [--jobs N] [--build DIR]
#   SECONDS  per harness (default 60); NAME: dataset, image, sources, checkpoint (default: all)
#   --jobs N libFuzzer -fork=N (N processes per harness; default 1)
#   --build DIR  the fuzz build (default build-fuzz/, configured and built here when needed)
# Exit: 0 nothing found, 1 a harness found an input that fails (see the list printed),
#       2 usage or build error, 77 clang missing.
# A finding becomes a regression test: copy the file into tests/fuzz/crashes/<name>/ (every
# ordinary build replays that folder), fix the bug, and rerun.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds=60 jobs=1 build="$root/build-fuzz" names=()
while (($#)); do
    case "$1" in
        --jobs) jobs=${2:?--jobs needs N}; shift ;;
        --build) build=${2:?--build needs DIR}; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        [0-9]*) seconds=$1 ;;
        -*) echo "fuzz.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
        *) names+=("$1") ;;
    esac
    shift
done
[[ $seconds =~ ^[0-9]+$ && $jobs =~ ^[0-9]+$ && $jobs -ge 1 ]] || { echo "fuzz.sh: SECONDS and N must be numbers" >&2; exit 2; }
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/setup.sh installs it)"; exit 77; }
if ((${#names[@]} == 0)); then
    for f in "$root"/tests/fuzz/fuzz_*.c; do n=$(basename "$f" .c); names+=("${n#fuzz_}"); done
fi

if [[ ! -f $build/CMakeCache.txt ]]; then
    echo "=== configure $build (clang, FL_FUZZ=ON)"
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
        -DCMAKE_CXX_COMPILER=clang++ -DFL_FUZZ=ON >"$build.configure.log" 2>&1 ||
        { tail -30 "$build.configure.log"; echo "fuzz.sh: configure failed"; exit 2; }
fi
grep -q 'FL_FUZZ:BOOL=ON' "$build/CMakeCache.txt" || { echo "fuzz.sh: $build is not an FL_FUZZ=ON build"; exit 2; }
targets=()
for n in "${names[@]}"; do targets+=(--target "fuzz_$n"); done
echo "=== build ${names[*]}"
cmake --build "$build" -j"$(nproc)" "${targets[@]}" >"$build.build.log" 2>&1 ||
    { tail -30 "$build.build.log"; echo "fuzz.sh: build failed (a harness name wrong, or not wired in tests/fuzz/CMakeLists.txt?)"; exit 2; }

fd="$build/tests/fuzz"
summary=() found=0
for n in "${names[@]}"; do
    bin="$fd/fuzz_$n"
    [[ -x $bin ]] || { summary+=("$n: not built (not wired in tests/fuzz/CMakeLists.txt?)"); found=1; continue; }
    corpus="$fd/corpus-$n" seeds="$root/tests/fuzz/corpus/$n"
    art="$fd/findings-$n"
    mkdir -p "$corpus" "$seeds" "$art"
    before=$(ls "$art" | wc -l)
    echo "=== fuzz_$n: ${seconds} s, $jobs job(s); corpus $corpus + $seeds"
    extra=()
    ((jobs > 1)) && extra=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
    t0=$SECONDS
    # an input that makes a reader use more than FUZZ_RSS_MB is a finding (a bomb); ASan's
    # quarantine is kept small so the limit measures the reader
    ( cd "$fd" && ASAN_OPTIONS="quarantine_size_mb=16${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
        "$bin" -max_total_time="$seconds" -rss_limit_mb="${FUZZ_RSS_MB:-512}" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$art/" "${extra[@]}" "$corpus" "$seeds" ) >"$fd/fuzz-$n.log" 2>&1
    rc=$?
    execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$fd/fuzz-$n.log" | grep -oE '[0-9]+$' | tail -1)
    [[ -n $execs ]] || execs=$(grep -oE '^#[0-9]+' "$fd/fuzz-$n.log" | tail -1 | tr -d '#') # -fork mode
    cov=$(grep -oE 'cov: [0-9]+' "$fd/fuzz-$n.log" | tail -1)
    after=$(ls "$art" | wc -l)
    new=$((after - before))
    line="$n: $((SECONDS - t0)) s, ${execs:-?} execs, ${cov:-cov ?}, corpus $(ls "$corpus" | wc -l) files, exit $rc"
    if ((rc != 0 || new > 0)); then
        found=1
        line+=", $new new finding(s) — see $fd/fuzz-$n.log"
        grep -E '^==[0-9]+==ERROR|SUMMARY:|Test unit written' "$fd/fuzz-$n.log" | head -6 | sed 's/^/    /'
    fi
    summary+=("$line")
done
echo "=== summary"
printf '  %s\n' "${summary[@]}"
if ((found)); then
    echo "findings (copy each into tests/fuzz/crashes/<name>/ as a regression test, then fix):"
    for n in "${names[@]}"; do ls "$fd/findings-$n" 2>/dev/null | sed "s|^|  $fd/findings-$n/|"; done
    exit 1
fi
exit 0
