#!/usr/bin/env bash
# test_soak.sh — bounded resources over long runs. (1) `fastload bench --epochs E --json` over
# small datasets (raw+zstd shards with io pread and auto, LMDB, JPEG with random-resized-crop):
# resident memory after the last epoch may exceed the one after epoch 2 by at most 2 MiB + 5%.
# (2) rel_soak: create/close the loader CYCLES times (io_uring, pread, mmap, auto; 1-2 workers;
# held batches at close; O_DIRECT) and the dataset reader alone: no fd, io_uring ring, thread or
# mapping leaked, RSS within 4 MiB. Default E=50, CYCLES=200; FL_LONG_TESTS=1: E=500, CYCLES=1000.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$FLT" "$B/tests/reliability/rel_soak"
SOAK="$B/tests/reliability/rel_soak"
if ((LONG)); then epochs=500 cycles=1000; else epochs=50 cycles=200; fi
rss_bound=4096
if sanitized; then
    ((LONG)) || { epochs=10 cycles=40; }
    rss_bound=0 # ASan maps memory and quarantines freed blocks itself: RSS and mappings are not judged (LeakSanitizer checks leaks)
fi
"$MKIDX" "$T/idx" 2000 || die "fixture"
"$P" pack "$T/idx" "$T/raw" --compress zstd:3 --shard-size 256K --quiet 2>"$T/err" || die "pack raw: $(cat "$T/err")"
"$P" pack "$T/idx" "$T/lmdb" --compress zstd:3 --backend lmdb --quiet 2>"$T/err" || die "pack lmdb: $(cat "$T/err")"
"$P" pack "$T/idx" "$T/jpeg" --encode jpeg --shard-size 256K --quiet 2>"$T/err" || die "pack jpeg: $(cat "$T/err")"

# (1) many epochs in one process
for run in "raw --io pread" "raw --io auto" "lmdb" "jpeg --augment rrc,flip --size 24"; do
    ds=${run%% *} opts=${run#"$ds"}
    expect_status 0 "bench $run" -- "$FLT" bench "$T/$ds" $opts --epochs $epochs --batch 64 --workers 2 --json --quiet
    line=$(tail -n 1 "$T/out")
    series=$(sed -nE 's/.*"rss_mib_per_epoch":\[([^]]*)\].*/\1/p' <<<"$line")
    [[ -n $series ]] || { fail "bench $run: no rss_mib_per_epoch in the JSON: ${line:0:200}"; continue; }
    n=$(tr ',' '\n' <<<"$series" | grep -c .)
    [[ $n -eq $epochs ]] || fail "bench $run: $n RSS samples for $epochs epochs"
    read -r r2 rlast < <(tr ',' '\n' <<<"$series" | sed -n "2p;${n}p" | tr '\n' ' ')
    if sanitized; then
        pass "bench $run: $epochs epochs, RSS $r2 -> $rlast MiB (not bounded under sanitizers)"
    elif awk -v a="$r2" -v b="$rlast" 'BEGIN { exit !(b <= a * 1.05 + 2) }'; then
        pass "bench $run: $epochs epochs, RSS after epoch 2 $r2 MiB, after epoch $epochs $rlast MiB"
    else
        fail "bench $run: RSS grew from $r2 MiB (epoch 2) to $rlast MiB (epoch $epochs)"
    fi
done

# (2) open/close cycles
for ds in raw lmdb jpeg; do
    if "$SOAK" "$T/$ds" $cycles $rss_bound >"$T/out" 2>"$T/err"; then
        pass "$(sed "s|$T/||" "$T/out")"
    else
        fail "rel_soak $ds: $(cat "$T/err" "$T/out" | head -5)"
    fi
done
finish
