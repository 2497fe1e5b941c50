#!/usr/bin/env bash
# test_shard_dict.sh — small shards do not multiply the zstd dictionary:
# every shard carries the dictionary, so packdata keeps it to 1/16 of the shard size (none below
# 16K shards). Raw 28x28 images with zstd in 64K shards: the dataset is at most 1.25x the one in
# 256M shards (it was 145x with a 110 KB dictionary in each shard); 8K shards: no dictionary.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX"
"$MKIDX" "$T/idx" 3000 >/dev/null || die "fixture"
"$P" pack "$T/idx" "$T/big" --quiet 2>"$T/err" || die "pack 256M shards: $(cat "$T/err")"
"$P" pack "$T/idx" "$T/small" --shard-size 64K --quiet 2>"$T/err" || die "pack 64K shards: $(cat "$T/err")"
"$P" pack "$T/idx" "$T/tiny" --shard-size 8K --quiet 2>"$T/err" || die "pack 8K shards: $(cat "$T/err")"
big=$(du -sb "$T/big" | cut -f1)
small=$(du -sb "$T/small" | cut -f1)
n=$(ls "$T"/small/*.fls | wc -l)
dict=$(grep -o '"dictionary_bytes": *[0-9]*' "$T/small/manifest.json" | head -1 | grep -o '[0-9]*$')
echo "256M shards: $big bytes; 64K shards: $small bytes in $n shards, dictionary $dict bytes"
((n >= 10)) || fail "64K shards: only $n shards"
((dict <= 65536 / 16)) || fail "64K shards: a $dict-byte dictionary in every shard (want <= 4096)"
((small * 4 <= big * 5)) || fail "64K shards: $small bytes, over 1.25x the $big bytes of 256M shards"
tdict=$(grep -o '"dictionary_bytes": *[0-9]*' "$T/tiny/manifest.json" | head -1 | grep -o '[0-9]*$')
((tdict == 0)) || fail "8K shards: a $tdict-byte dictionary"
expect_status 0 "verify 64K shards" -- "$P" verify "$T/small"
expect_status 0 "verify 8K shards" -- "$P" verify "$T/tiny"
pass "dictionary kept to 1/16 of the shard size: $small bytes in 64K shards vs $big in 256M"
finish
