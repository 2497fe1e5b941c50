#!/usr/bin/env bash
# test_bench_json.sh — `fastload bench --json` reports how records were read:
# io_mode (backend, O_DIRECT or buffered, and why), the effective direct flag, read_amplification
# (bytes read / stored bytes delivered, prefetched batches included: ~1 for buffered raw records; <= 1.5
# for the quasi order's coalesced extents), page_cache_growth_mib; --io auto under a fake 1 MiB
# cgroup limit (FL_PROC_ROOT) picks O_DIRECT and says so on stderr and in io_mode.
set -u
B="${FL_BINARY_DIR:?FL_BINARY_DIR not set (run through ctest)}"
FLT="$B/tools/fastload/fastload"
MK="$B/tests/trainer/tf_make_dataset"
for t in "$FLT" "$MK"; do [[ -x "$t" ]] || { echo "SKIP: $t not built"; exit 77; }; done
T="$(mktemp -d "${TMPDIR:-/tmp}/bench-json.XXXXXX")"
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
"$MK" "$T/ds" 2000 32 32 3 10 1 >/dev/null || { echo "FAIL: dataset"; exit 1; }
ds="$T/ds/train"; [[ -d $ds ]] || ds="$T/ds"
# field EXPR JSON-FILE: python expression over j must hold
check() {
    /usr/bin/python3 - "$2" "$1" <<'PY' || fail "$1 ($(cat "$2"))"
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
"$FLT" bench "$ds" --io pread --batch 50 --epochs 1 --json >"$T/a.json" 2>/dev/null || fail "bench pread"
check 'j["io_mode"].startswith("pread, buffered") and j["direct"] is False' "$T/a.json"
check '1 <= j["read_amplification"] <= 1.1 and isinstance(j["page_cache_growth_mib"], (int, float))' "$T/a.json"
check '"cgroup_page_cache_growth_mib" in j and j["bytes_stored_delivered"] == 2000 * 32 * 32 * 3' "$T/a.json"
# fake cgroup v1 limit of 1 MiB: --io auto reads the 6 MB data set with O_DIRECT and says why
R="$T/root"
mkdir -p "$R/proc/self" "$R/sys/fs/cgroup/memory/job"
echo "MemAvailable:    8000000 kB" >"$R/proc/meminfo"
echo "4:memory:/job" >"$R/proc/self/cgroup"
echo 1048576 >"$R/sys/fs/cgroup/memory/job/memory.limit_in_bytes"
FL_PROC_ROOT="$R" "$FLT" bench "$ds" --io auto --batch 50 --epochs 1 --json \
    >"$T/b.json" 2>"$T/b.err" || fail "bench auto: $(cat "$T/b.err")"
check '"(io auto: the data set" in j["io_mode"] and "cgroup memory limit" in j["io_mode"]' "$T/b.json"
grep -q "io auto: the data set .* O_DIRECT reads" "$T/b.err" || fail "no log line: $(cat "$T/b.err")"
# quasi order, O_DIRECT, io_uring: coalesced extents, few bytes read twice. Reads ahead of the
# last batch count (the ring's 4 batches, two quasi windows = 256 samples): <= ~0.1 of 3 epochs
if "$FLT" bench "$ds" --io uring --direct --order quasi --quasi-window 2 --batch 50 --epochs 3 --json \
    >"$T/c.json" 2>"$T/c.err"; then
    check '"coalesced extents" in j["io_mode"] and 1 <= j["read_amplification"] <= 1.5' "$T/c.json"
else
    grep -q "io_uring" "$T/c.err" && echo "note: io_uring unavailable: quasi check skipped" || fail "quasi: $(cat "$T/c.err")"
fi
((failures == 0)) && echo "test_bench_json: OK"
exit $((failures > 0))
