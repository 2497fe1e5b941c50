#!/usr/bin/env bash
# test_tmpfs_enospc.sh — a real ENOSPC: a 1-MiB tmpfs (needs root and mount; skips otherwise).
# `packdata pack` into it fails with a clear error, nothing at DST, complete shards kept in
# DST.partial; after the tmpfs grows (remount), `--resume` completes and equals an uninterrupted
# pack. trainfast checkpointing onto a nearly full tmpfs fails clearly, keeps the earlier
# checkpoints, and resumes (after the remount) to weights identical to an uninterrupted run.
# No LD_PRELOAD: this test also runs in sanitized builds.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$TF"
M="$T/mnt"
mkdir -p "$M"
mount -t tmpfs -o size=1m fl-rel-test "$M" 2>/dev/null || skip "cannot mount a tmpfs (not root?)"
cleanup_hooks+=("umount '$M' 2>/dev/null || umount -l '$M' 2>/dev/null")

"$MKIDX" "$T/idx" 3000 || die "fixture"
args=(--compress zstd:3 --shard-size 256K --quiet)
"$P" pack "$T/idx" "$T/ref" "${args[@]}" 2>"$T/err" || die "reference pack: $(cat "$T/err")"
[[ $(cat "$T"/ref/* | wc -c) -gt $((1 << 20)) ]] || die "the reference should not fit in 1 MiB"

expect_status 1 "pack into a full tmpfs" -- "$P" pack "$T/idx" "$M/ds" "${args[@]}"
expect_err "No space left on device" "full tmpfs: error names the cause"
expect_err "ds.partial/" "full tmpfs: error names the file"
[[ $(grep -c . "$T/err") -le 3 ]] || fail "full tmpfs: more than a short error: $(head -5 "$T/err")"
[[ ! -e $M/ds ]] || fail "full tmpfs: DST exists after the failure"
errline=$(grep error: "$T/err" | head -1 | sed "s|$T/||g")
kept=$(ls "$M/ds.partial"/*.fls 2>/dev/null | wc -l)
for s in "$M/ds.partial"/*.fls; do
    [[ -e $s ]] || continue
    cmp -s "$s" "$T/ref/$(basename "$s")" || fail "full tmpfs: kept $(basename "$s") differs from the reference"
done
mount -o remount,size=16m "$M" || die "remount"
expect_status 0 "--resume after the tmpfs grew" -- "$P" pack "$T/idx" "$M/ds" "${args[@]}" --resume
expect_status 0 "verify after resume" -- "$P" verify "$M/ds"
msg=$(same_dataset "$T/ref" "$M/ds") || fail "resumed dataset differs from the reference: $msg"
pass "real ENOSPC during pack ($kept complete shards kept): '$errline'; resume = reference"
rm -rf "$M/ds"

# trainfast: room for two checkpoints but not for the third's temporary file
train_reference 2000 300 2 "$T/cref"
ref=$(newest_ckpt "$T/cref")
size=$(stat -c %s "$ref")
mount -o remount,size=1m "$M" || die "remount"
free=$(($(stat -f -c '%a * %S' "$M")))
fill=$((free - size * 5 / 2))
[[ $fill -gt 0 ]] || die "checkpoints too large for the 1-MiB tmpfs ($size bytes)"
head -c $fill /dev/zero >"$M/filler" 2>/dev/null
expect_status 1 "trainfast onto a nearly full tmpfs" -- "$TF" train "${common[@]}" --checkpoint "$M/c"
expect_err "No space left on device" "checkpoint: error names the cause"
expect_err "c/ckpt-" "checkpoint: error names the file"
errline=$(grep error: "$T/err" | head -1 | sed "s|$T/||g")
ls "$M/c"/*.tmp >/dev/null 2>&1 && fail "checkpoint: a .tmp file is left"
n=$(ls "$M/c"/ckpt-*.tfc 2>/dev/null | wc -l)
[[ $n -ge 1 ]] || fail "checkpoint: no earlier checkpoint kept"
for f in "$M/c"/ckpt-*.tfc; do
    [[ -e $f ]] || continue
    "$TF" eval "$f" "$T/data/val" >/dev/null 2>&1 || fail "checkpoint: kept $(basename "$f") does not verify"
done
rm -f "$M/filler"
expect_status 0 "trainfast --resume with room again" -- "$TF" train "${common[@]}" --checkpoint "$M/c" --resume
got=$(newest_ckpt "$M/c")
[[ $(basename "$got") == $(basename "$ref") ]] || fail "resumed run ended at $(basename "$got"), not $(basename "$ref")"
same_weights "$ref" "$got" || fail "resumed weights differ from the uninterrupted run"
pass "real ENOSPC during checkpointing ($n checkpoints kept): '$errline'; resume = uninterrupted run"
finish
