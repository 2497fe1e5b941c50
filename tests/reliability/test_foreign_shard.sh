#!/usr/bin/env bash
# test_foreign_shard.sh — a shard file copied in from another dataset of the
# same shape passed `verify` ("0 bad") and `extract` returned the other dataset's image. Opening
# must compare every shard's dataset id (format version 2) and size with the manifest: `info`,
# `verify`, `extract` and `fastload bench` exit 1 naming the shard ("belongs to another dataset").
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$FLT"
unset FL_DATASET_ID # each pack gets its own random id
"$MKIDX" "$T/idxA" 2000 28 28 1 || die "fixture A"
"$MKIDX" "$T/idxB" 2000 28 28 2 || die "fixture B"
for x in A B; do
    "$P" pack "$T/idx$x" "$T/$x" --compress none --shard-size 256K --quiet 2>"$T/err" || die "pack $x: $(cat "$T/err")"
done
[[ -f $T/A/shard-00002.fls && -f $T/B/shard-00002.fls ]] || die "fixtures should have at least 3 shards"
cmp -s "$T/A/shard-00001.fls" "$T/B/shard-00001.fls" && die "fixtures A and B have identical shards"
idA=$(sed -nE 's/.*"dataset_id": "([0-9a-f]{32})".*/\1/p' "$T/A/manifest.json")
idB=$(sed -nE 's/.*"dataset_id": "([0-9a-f]{32})".*/\1/p' "$T/B/manifest.json")
if [[ -n $idA && -n $idB && $idA != "$idB" ]]; then pass "two packs, two dataset ids"
else fail "two packs should get two dataset ids ('$idA', '$idB')"; fi
expect_status 0 "A verifies" -- "$P" verify "$T/A"
# first record of shard 1, from the manifest
first1=$(grep '"shard-00001.fls"' "$T/A/manifest.json" | sed -E 's/.*"first": *([0-9]+).*/\1/')
[[ -n $first1 ]] || die "no shard-00001.fls in A's manifest"

check_refused() { # check_refused LABEL NEEDLE
    local label=$1 needle=$2 what
    for what in "info" "verify" "extract $first1 -o $T/x.out" "bench"; do
        local -a cmd
        if [[ $what == bench ]]; then cmd=("$FLT" bench "$T/A" --batch 64 --workers 2 --quiet)
        else read -r -a w <<<"$what"; cmd=("$P" "${w[0]}" "$T/A" "${w[@]:1}"); fi
        expect_status 1 "$label: $what" -- "${cmd[@]}" || continue
        expect_err "shard-00001.fls" "$label: $what names the shard" || continue
        expect_err "$needle" "$label: $what says why" || continue
    done
    pass "$label: $(grep -m1 error "$T/err" | sed "s|$T/||g")"
}

# B's shard 1 in place of A's (same shape, same record count)
cp "$T/A/shard-00001.fls" "$T/A1.keep"
cp "$T/B/shard-00001.fls" "$T/A/shard-00001.fls"
check_refused "shard from another dataset" "belongs to another dataset"
# the shard restored: A is whole again
cp "$T/A1.keep" "$T/A/shard-00001.fls"
expect_status 0 "A verifies with its own shard back" -- "$P" verify "$T/A"
# a shard of another size than the manifest records (A's own id: only the size gives it away)
cp "$T/A/manifest.json" "$T/man.keep"
bytes1=$(stat -c %s "$T/A/shard-00001.fls")
sed -i -E "s/(\"shard-00001.fls\".*\"bytes\": )$bytes1/\1$((bytes1 + 4096))/" "$T/A/manifest.json"
grep -q "\"bytes\": $((bytes1 + 4096))" "$T/A/manifest.json" || die "could not edit the manifest"
check_refused "shard size differs from the manifest" "the manifest says $((bytes1 + 4096))"
finish
