#!/usr/bin/env bash
# test_eio_load.sh — EIO (injected by the LD_PRELOAD shim) while reading: the loader
# (`fastload bench` / `fastload digest` with --io pread: io_uring and mmap reads bypass libc, so
# the shim cannot reach them) exits 1 naming the shard file and a record of that shard (with
# --io memory, which copies the shards at start: the shard and the offset), and
# --on-corrupt skip either skips and counts the unreadable records or stops with the same clear
# error; `packdata pack` with an unreadable input (IDX file, one image of an ImageFolder) fails
# naming the file, or with --on-error skip reports that image and packs the rest.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$FLT"
need_preload
"$MKIDX" "$T/idx" 3000 || die "fixture"
"$P" pack "$T/idx" "$T/ds" --compress zstd:3 --shard-size 256K --quiet 2>"$T/err" || die "pack: $(cat "$T/err")"
[[ -f $T/ds/shard-00002.fls ]] || die "fixture should have at least 3 shards"
# shard 2's record range, from the manifest
read -r first count < <(grep '"shard-00002.fls"' "$T/ds/manifest.json" |
    sed -E 's/.*"first": *([0-9]+), *"records": *([0-9]+).*/\1 \2/')
size2=$(stat -c %s "$T/ds/shard-00002.fls")
eio=(FL_FAULT_EIO_PATH=/ds/shard-00002.fls FL_FAULT_EIO_OFFSET=$((size2 / 2)) FL_FAULT_REPORT="$T/report")
bench=(--io pread --batch 100 --workers 2 --quiet)

expect_status 0 "bench without a fault" -- "$FLT" bench "$T/ds" "${bench[@]}"

# the loader: EIO in the middle of shard 2
for tool in bench digest; do
    rm -f "$T/report"
    expect_status 1 "$tool with EIO" -- with_faults "${eio[@]}" -- "$FLT" $tool "$T/ds" "${bench[@]}" --order seq
    grep -q '^EIO' "$T/report" 2>/dev/null || { fail "$tool: the fault never fired"; continue; }
    expect_err "shard-00002.fls: record " "$tool: error names the shard and record"
    expect_err "Input/output error" "$tool: error names the cause"
    rec=$(sed -nE 's/.*shard-00002.fls: record ([0-9]+).*/\1/p' "$T/err" | head -1)
    [[ -n $rec && $rec -ge $first && $rec -lt $((first + count)) ]] ||
        fail "$tool: record '$rec' is not one of shard 2's records [$first, $((first + count)))"
    [[ $(grep -c . "$T/err") -le 3 ]] || fail "$tool: more than a short error: $(head -5 "$T/err")"
    pass "$tool --io pread, EIO in shard 2: '$(grep error "$T/err" | head -1 | sed "s|$T/||g")'"
done

# --io memory copies every shard with pread at start: EIO fails the creation, naming the shard
rm -f "$T/report"
expect_status 1 "bench --io memory with EIO" -- with_faults "${eio[@]}" -- "$FLT" bench "$T/ds" --io memory --quiet
grep -q '^EIO' "$T/report" 2>/dev/null || fail "--io memory: the fault never fired"
expect_err "shard-00002.fls: read failed at byte " "--io memory: error names the shard and offset"
expect_err "Input/output error" "--io memory: error names the cause"
pass "bench --io memory, EIO in shard 2: '$(grep error "$T/err" | head -1 | sed "s|$T/||g")'"

# random order, several workers: still a clean error
expect_status 1 "bench random order with EIO" -- with_faults "${eio[@]}" -- "$FLT" bench "$T/ds" "${bench[@]}" --epochs 2
expect_err "shard-00002.fls: record " "random order: error names the shard and record"

# --on-corrupt skip: the unreadable records are skipped and counted, or the run stops clearly
with_faults "${eio[@]}" -- "$FLT" bench "$T/ds" --io pread --batch 100 --workers 2 --on-corrupt skip >"$T/out" 2>"$T/err"
st=$?
if [[ $st -eq 0 ]]; then
    n=$(sed -nE 's/.*skipped corrupt records: ([0-9]+).*/\1/p' "$T/out" "$T/err" | head -1)
    [[ -n $n && $n -gt 0 && $n -le $count ]] || fail "skip mode: exit 0 but skipped count '$n' (want 1..$count)"
    pass "--on-corrupt skip: $n unreadable records skipped and counted"
elif [[ $st -eq 1 ]]; then
    expect_err "shard-00002.fls: record " "skip mode: stops with an error naming the record" &&
        pass "--on-corrupt skip: stops with a clear error (EIO is not skipped)"
else
    fail "skip mode with EIO: exit $st"
fi

# packdata: unreadable inputs
rm -f "$T/report"
expect_status 1 "pack with an unreadable IDX file" -- with_faults FL_FAULT_EIO_PATH=/idx/train-images \
    FL_FAULT_EIO_OFFSET=100000 FL_FAULT_REPORT="$T/report" -- "$P" pack "$T/idx" "$T/bad" --quiet
grep -q '^EIO' "$T/report" 2>/dev/null || fail "pack IDX: the fault never fired"
expect_err "train-images-idx3-ubyte" "pack IDX: error names the file"
expect_err "Input/output error" "pack IDX: error names the cause"
[[ ! -e $T/bad ]] || fail "pack IDX: DST exists after the failure"
pass "pack, EIO in the IDX input: '$(grep error "$T/err" | head -1 | sed "s|$T/||g")'"

mkdir -p "$T/imf/a" "$T/imf/b"
for i in 0 1 2 3 4 5; do
    "$P" extract "$T/ds" $i -o "$T/imf/a/$i.png" 2>/dev/null || die "extract"
    "$P" extract "$T/ds" $((i + 10)) -o "$T/imf/b/$i.png" 2>/dev/null || die "extract"
done
expect_status 1 "pack with an unreadable image" -- with_faults FL_FAULT_EIO_PATH=/imf/a/3.png -- \
    "$P" pack "$T/imf" "$T/bad2" --quiet
expect_err "a/3.png" "pack image: error names the file"
expect_err "Input/output error" "pack image: error names the cause"
[[ ! -e $T/bad2 ]] || fail "pack image: DST exists after the failure"
expect_status 0 "pack --on-error skip with an unreadable image" -- with_faults FL_FAULT_EIO_PATH=/imf/a/3.png -- \
    "$P" pack "$T/imf" "$T/skip" --quiet --on-error skip --report "$T/skip.tsv"
grep -q "a/3.png.*Input/output error" "$T/skip.tsv" || fail "skip report: $(cat "$T/skip.tsv")"
"$P" info "$T/skip" --json | grep -q '"records":11,' || fail "skip mode should pack the 11 readable images"
pass "pack, EIO in one image: fails naming it; --on-error skip reports it and packs the other 11"
finish
