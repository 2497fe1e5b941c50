#!/usr/bin/env bash
# test_truncate_live.sh — a shard truncated in place while `fastload bench` reads it (another
# process rewriting the dataset, a full disk on a network filesystem): with --io pread and
# --io uring the loader stops with exit 1 naming the shard and record ("file ends early"). With
# --io memory, and --io auto on a dataset this small (which it reads into memory at start), the
# run goes on from its private copy and ends normally — never SIGBUS (regression: auto used to
# pick the mmap reader for small records, which touched pages past the new end of file).
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$FLT"
"$MKIDX" "$T/idx" 3000 || die "fixture"
"$P" pack "$T/idx" "$T/ds" --compress zstd:3 --shard-size 256K --quiet 2>"$T/err" || die "pack: $(cat "$T/err")"
[[ -f $T/ds/shard-00001.fls ]] || die "fixture should have several shards"
for io in pread uring; do
    d="$T/ds-$io"
    cp -a "$T/ds" "$d"
    timeout 120 "$FLT" bench "$d" --io $io --epochs 100000 --batch 64 --workers 2 --quiet >/dev/null 2>"$T/err" &
    pid=$!
    sleep 0.5
    truncate -s 100000 "$d/shard-00001.fls"
    wait $pid
    st=$?
    if [[ $st -eq 1 ]] && grep -q "error: .*shard-00001.fls" "$T/err"; then
        pass "--io $io, shard truncated mid-run: '$(grep error "$T/err" | head -1 | sed "s|$T/||g")'"
    else
        fail "--io $io, shard truncated mid-run: exit $st ($( ((st > 128)) && kill -l $((st - 128)) )), stderr: $(head -2 "$T/err")"
    fi
done
for io in memory auto; do
    d="$T/ds-$io"
    cp -a "$T/ds" "$d"
    "$FLT" bench "$d" --io $io --epochs 1 --batch 64 --workers 2 --json >"$T/ref-$io.json" 2>"$T/err" ||
        die "--io $io, untouched dataset: $(cat "$T/err")"
    grep -q '"io_backend":"memory"' "$T/ref-$io.json" || die "--io $io: not read into memory: $(cat "$T/ref-$io.json")"
    timeout 120 "$FLT" bench "$d" --io $io --batches 4000 --batch 64 --workers 2 --quiet >/dev/null 2>"$T/err" &
    pid=$!
    sleep 0.5
    truncate -s 100000 "$d/shard-00001.fls"
    wait $pid
    st=$?
    if [[ $st -eq 0 ]]; then
        pass "--io $io, shard truncated mid-run: the in-memory copy carried the run to its end"
    else
        fail "--io $io, shard truncated mid-run: exit $st ($( ((st > 128)) && kill -l $((st - 128)) )), stderr: $(head -2 "$T/err")"
    fi
done
finish
