#!/usr/bin/env bash
# test_cli.sh — the `fastload` command: --help/--version, bench text and --json output (keys and
# counts), bench --memcpy, digest equal across worker counts / I/O modes, a corrupt dataset →
# exit 1 with one error line naming the shard, usage errors → exit 2 naming the option.
# Environment (set by CTest): FASTLOAD_CLI, FL_MAKE_DATASET.
set -u
cli=${FASTLOAD_CLI:-}
maker=${FL_MAKE_DATASET:-}
[[ -x "$cli" && -x "$maker" ]] || { echo "SKIP: FASTLOAD_CLI / FL_MAKE_DATASET not set"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fl-clitest-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, then a command that must succeed
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}

"$maker" "$tmp/ds" --count 100 --height 6 --width 8 --classes 4 || { echo "FAIL fixture"; exit 1; }
"$maker" "$tmp/bad" --count 100 --height 6 --width 8 --classes 4 || { echo "FAIL fixture"; exit 1; }
shard=$(basename "$("$maker" "$tmp/bad" --corrupt 5 | cut -d' ' -f1)")

check "--version" bash -c "'$cli' --version | grep -q '^fastload 0'"
check "--help" bash -c "'$cli' --help | grep -q bench && '$cli' bench --help | grep -q -- --workers && '$cli' digest --help | grep -q SHA-256"

# text report names the figures
"$cli" bench "$tmp/ds" --batch 16 --epochs 2 --workers 2 >"$tmp/bench.txt" 2>"$tmp/bench.err"
check "bench text exit 0" test $? -eq 0
check "bench text figures" grep -q "images/s.*MB/s" "$tmp/bench.txt"
check "bench text stages" grep -q "io wait.*decode.*augment.*slot wait" "$tmp/bench.txt"
check "bench per-epoch lines" test "$(grep -c '^epoch ' "$tmp/bench.err")" -eq 2

# JSON: keys present, counts exact (7 batches of 16 per epoch, padded) — parsed with python when there
"$cli" bench "$tmp/ds" --batch 16 --epochs 3 --workers 2 --augment rrc,flip --size 4 --json >"$tmp/b.json"
check "bench --json exit 0" test $? -eq 0
for k in images_per_sec mb_per_sec epochs images stages io_backend workers decode_s slot_wait_s rss_mib_per_epoch; do
    check "bench --json has $k" grep -q "\"$k\"" "$tmp/b.json"
done
if /usr/bin/python3 -c "import json" 2>/dev/null; then
    check "bench --json values" /usr/bin/python3 -c "
import json, sys
d = json.load(open('$tmp/b.json'))
assert d['epochs'] == 3 and d['images'] == 3 * 7 * 16 and d['batches'] == 21, d
assert d['images_per_sec'] > 0 and d['mb_per_sec'] > 0 and d['workers'] == 2, d
assert (d['height'], d['width'], d['channels']) == (4, 4, 3), d
assert len(d['rss_mib_per_epoch']) == 3
"
fi
# memory stays flat over 20 epochs (the ring is allocated up front)
"$cli" bench "$tmp/ds" --batch 16 --epochs 20 --workers 2 --augment rrc,flip --size 8 --json >"$tmp/rss.json"
if /usr/bin/python3 -c "import json" 2>/dev/null; then
    check "bench RSS flat over 20 epochs" /usr/bin/python3 -c "
import json
r = json.load(open('$tmp/rss.json'))['rss_mib_per_epoch']
assert len(r) == 20 and max(r[1:]) - r[1] < 2.0, r
"
fi
check "bench --memcpy" bash -c "'$cli' bench --memcpy --memcpy-bytes 8M --json | grep -q '\"memcpy_mb_per_sec\"'"

# digest: same stream whatever the workers and I/O mode
opts=(--batch 16 --augment rrc,flip --size 5x4 --order random --seed 3 --epochs 2)
"$cli" digest "$tmp/ds" "${opts[@]}" --workers 1 >"$tmp/d1" && \
"$cli" digest "$tmp/ds" "${opts[@]}" --workers 2 --io pread >"$tmp/d2" && \
"$cli" digest "$tmp/ds" "${opts[@]}" --workers 3 --direct >"$tmp/d3" && \
"$cli" digest "$tmp/ds" "${opts[@]}" --workers 2 --io mmap >"$tmp/d6" && \
"$cli" digest "$tmp/ds" "${opts[@]}" --workers 2 --io memory >"$tmp/d7" && \
"$cli" digest "$tmp/ds" "${opts[@]}" --workers 1 --decode fast >"$tmp/f1" && \
"$cli" digest "$tmp/ds" "${opts[@]}" --workers 3 --decode fast --io pread >"$tmp/f3"
check "digest runs" test $? -eq 0
check "digest lines" test "$(grep -c '^[01] ' "$tmp/d1")" -eq 14
check "digest 1 worker == 2 workers pread" cmp -s "$tmp/d1" "$tmp/d2"
check "digest == 3 workers O_DIRECT" cmp -s "$tmp/d1" "$tmp/d3"
check "digest == 2 workers mmap" cmp -s "$tmp/d1" "$tmp/d6"
check "digest == 2 workers memory" cmp -s "$tmp/d1" "$tmp/d7"
check "digest --decode fast: 1 worker == 3 workers pread" cmp -s "$tmp/f1" "$tmp/f3"
# the same records in an LMDB environment give the same stream
if "$maker" "$tmp/lmdb" --count 100 --height 6 --width 8 --classes 4 --lmdb; then
    "$cli" digest "$tmp/lmdb" "${opts[@]}" --workers 2 >"$tmp/dl"
    check "digest shards == LMDB" cmp -s "$tmp/d1" "$tmp/dl"
else
    echo "FAIL LMDB fixture"; fail=1
fi
"$cli" digest "$tmp/ds" "${opts[@]}" --seed 4 >"$tmp/d4"
check "digest differs with another seed" bash -c "! cmp -s '$tmp/d1' '$tmp/d4'"
# resume: start at epoch 0 batch 3 = the tail of the full stream
"$cli" digest "$tmp/ds" "${opts[@]}" --start-batch 3 >"$tmp/d5"
check "digest resume" bash -c "diff <(grep -v stream '$tmp/d1' | tail -n +4) <(grep -v stream '$tmp/d5')"

# corrupt dataset: exit 1, one clear line naming the shard
"$cli" bench "$tmp/bad" --batch 16 --order seq >/dev/null 2>"$tmp/bad.err"
rc=$?
check "corrupt: exit 1" test $rc -eq 1
check "corrupt: names the shard" grep -q "error: .*$shard" "$tmp/bad.err"
"$cli" bench "$tmp/bad" --batch 16 --order seq --drop-last --on-corrupt skip --json >"$tmp/skip.json" 2>/dev/null
check "corrupt: --on-corrupt skip exit 0" test $? -eq 0
check "corrupt: skip counted" grep -Eq '"skipped": ?[1-9]' "$tmp/skip.json"

# missing dataset and usage errors
"$cli" bench "$tmp/nope" 2>"$tmp/nope.err"
check "missing dataset: exit 1" test $? -eq 1
check "missing dataset: named" grep -q "nope" "$tmp/nope.err"
for args in "--workers x" "--batch 0" "--order sorted" "--augment blur" "--io aio" "--size 3y4" "--decode slow" \
            "--rank 2 --world 2" "--frobnicate"; do
    # shellcheck disable=SC2086
    "$cli" bench "$tmp/ds" $args 2>"$tmp/usage.err"
    rc=$?
    check "usage '$args': exit 2" test $rc -eq 2
    check "usage '$args': message" test -s "$tmp/usage.err"
done
"$cli" bench 2>/dev/null
check "no DST: exit 2" test $? -eq 2
"$cli" frob 2>/dev/null
check "unknown command: exit 2" test $? -eq 2
exit $fail
