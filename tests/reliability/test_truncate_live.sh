#!/usr/bin/env bash
# test_truncate_live.sh — a shard truncated in place while `fastload bench` reads it (another
# process rewriting the dataset, a full disk on a network filesystem): with --io pread and
# --io uring the loader stops with exit 1 naming the shard and record ("file ends early"). With
# --io memory, and --io auto on a dataset this small (which it reads into memory at start), the
# run goes on from its private copy and ends normally — never SIGBUS (regression: auto used to
# pick the mmap reader for small records, which touched pages past the new end of file). With
# --io mmap, and LMDB (always mapped), the pages past the new end fault: the loader's guard turns
# that into the record's error ("shorter than when it was opened"), exit 1, no SIGBUS — for
# records copied into the batch as they are (raw, uncompressed) and for those decompressed.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$FLT"
"$MKIDX" "$T/idx" 3000 || die "fixture"
"$P" pack "$T/idx" "$T/ds" --compress zstd:3 --shard-size 256K --quiet 2>"$T/err" || die "pack: $(cat "$T/err")"
[[ -f $T/ds/shard-00001.fls ]] || die "fixture should have several shards"
"$P" pack "$T/idx" "$T/ds-raw" --compress none --shard-size 256K --quiet 2>"$T/err" || die "pack: $(cat "$T/err")"
for io in pread uring memory auto mmap mmap-raw; do
    d="$T/ds-$io"
    if [[ $io == mmap-raw ]]; then
        cp -a "$T/ds-raw" "$d"
        io=mmap
    else
        cp -a "$T/ds" "$d"
    fi
    in_memory=0
    if [[ $io == memory || $io == auto ]]; then
        in_memory=1
        "$FLT" bench "$d" --io $io --epochs 1 --batch 64 --workers 2 --json >"$T/ref.json" 2>"$T/err" ||
            die "--io $io, untouched dataset: $(cat "$T/err")"
        grep -q '"io_backend":"memory"' "$T/ref.json" || die "--io $io: not read into memory: $(cat "$T/ref.json")"
    fi
    # pread/uring: until the truncation fails a read; memory: a bounded run that must end normally
    run=(--epochs 100000) && ((in_memory)) && run=(--batches 4000)
    timeout 120 "$FLT" bench "$d" --io $io "${run[@]}" --batch 64 --workers 2 --quiet >/dev/null 2>"$T/err" &
    pid=$!
    sleep 0.5
    truncate -s 100000 "$d/shard-00001.fls"
    wait $pid
    st=$?
    if ((in_memory)) && [[ $st -eq 0 ]]; then
        pass "--io $io, shard truncated mid-run: the in-memory copy carried the run to its end"
    elif ((!in_memory)) && [[ $st -eq 1 ]] && grep -q "error: .*shard-00001.fls" "$T/err" &&
        { [[ $io != mmap ]] || grep -q "shorter than when it was opened" "$T/err"; }; then
        pass "--io $io, shard truncated mid-run: '$(grep error "$T/err" | head -1 | sed "s|$T/||g")'"
    else
        fail "--io $io ($d), shard truncated mid-run: exit $st ($( ((st > 128)) && kill -l $((st - 128)) )), stderr: $(head -2 "$T/err")"
    fi
done

# LMDB: the data file cut to half its size while the loader reads it
"$P" pack "$T/idx" "$T/lmdb" --backend lmdb --compress zstd:3 --quiet 2>"$T/err" || die "pack lmdb: $(cat "$T/err")"
timeout 120 "$FLT" bench "$T/lmdb" --epochs 100000 --batch 64 --workers 2 --quiet >/dev/null 2>"$T/err" &
pid=$!
sleep 0.5
sz=$(stat -c %s "$T/lmdb/data.mdb")
truncate -s $((sz / 2)) "$T/lmdb/data.mdb"
wait $pid
st=$?
if [[ $st -eq 1 ]] && grep -q "shorter than when it was opened" "$T/err"; then
    pass "LMDB, data.mdb truncated mid-run: '$(grep error "$T/err" | head -1 | sed "s|$T/||g")'"
else
    fail "LMDB, data.mdb truncated mid-run: exit $st ($( ((st > 128)) && kill -l $((st - 128)) )), stderr: $(head -2 "$T/err")"
fi
finish
