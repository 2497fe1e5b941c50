#!/usr/bin/env bash
# test_dst_mountpoint.sh — `packdata pack SRC DST` where DST is a mount point (a freshly mounted,
# empty disk; a bind mount): the dataset is built beside DST, in DST.partial on the parent's file
# system, and renamed into place, which a mount point cannot be. It is refused up front (exit 2,
# naming DST and saying to pack into a folder inside it), nothing is written beside it, and a
# dataset copied onto a mount point is not replaced by --force; a folder inside the mount packs.
# Needs root and mount (skips otherwise). No LD_PRELOAD: runs in sanitized builds too.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX"
M="$T/mnt"
mkdir -p "$M"
mount -t tmpfs -o size=8m fl-rel-test "$M" 2>/dev/null || skip "cannot mount a tmpfs (not root?)"
cleanup_hooks+=("umount '$M' 2>/dev/null || umount -l '$M' 2>/dev/null")

"$MKIDX" "$T/idx" 200 >/dev/null || die "fixture"
args=(--compress zstd:3 --quiet)

nothing_beside() { # $1: what; nothing of a pack is left beside the mount point
    local f left=""
    for f in "$M.partial" "$M.partial.plan" "$M.partial.skips" "$M.lock"; do
        [[ -e $f ]] && left="$left $(basename "$f")"
    done
    [[ -z $left ]] || fail "$1: left beside the mount point:$left"
}

for backend in shards lmdb; do
    expect_status 2 "pack into an empty mount point ($backend)" -- \
        "$P" pack "$T/idx" "$M" "${args[@]}" --backend "$backend"
    expect_err "$M is a mount point" "mount point ($backend): error names DST and why"
    expect_err "a folder inside it" "mount point ($backend): error says what to do"
    expect_err "nothing was changed" "mount point ($backend): error says nothing was changed"
    nothing_beside "mount point ($backend)"
    [[ -z $(ls -A "$M") ]] || fail "mount point ($backend): something was written into it"
done
pass "an empty mount point as DST is refused up front, nothing written beside it"

expect_status 0 "pack into a folder inside the mount point" -- "$P" pack "$T/idx" "$M/ds" "${args[@]}"
expect_status 0 "verify the folder inside the mount point" -- "$P" verify "$M/ds"
pass "a folder inside the mount point packs"

# a dataset copied onto the mount point itself: --force refuses, the files stay as they were
cp "$M"/ds/* "$M"/ && rm -rf "$M/ds" || die "copy"
sum_before=$(cd "$M" && sha256sum * | sha256sum)
expect_status 2 "pack --force onto a mount point holding a dataset" -- \
    "$P" pack "$T/idx" "$M" "${args[@]}" --force
expect_err "$M is a mount point" "--force onto a mount point: error names DST and why"
nothing_beside "--force onto a mount point"
[[ $(cd "$M" && sha256sum * | sha256sum) == "$sum_before" ]] || fail "--force onto a mount point: its files changed"
expect_status 0 "the dataset on the mount point still verifies" -- "$P" verify "$M"
pass "--force does not try to replace a mount point"

# a bind mount of a folder of the same file system (same device as its parent)
rm -rf "${M:?}"/*
B2="$T/bind"
mkdir -p "$B2"
if mount --bind "$B2" "$B2" 2>/dev/null; then
    cleanup_hooks+=("umount '$B2' 2>/dev/null || umount -l '$B2' 2>/dev/null")
    expect_status 2 "pack into a bind mount point" -- "$P" pack "$T/idx" "$B2" "${args[@]}"
    expect_err "$B2 is a mount point" "bind mount: error names DST and why"
    [[ ! -e $B2.partial ]] || fail "bind mount: $B2.partial was written"
    pass "a bind mount point as DST is refused"
fi

# an ordinary empty folder is still a valid DST
mkdir -p "$T/empty"
expect_status 0 "pack into an empty folder" -- "$P" pack "$T/idx" "$T/empty" "${args[@]}"
expect_status 0 "verify the empty folder's dataset" -- "$P" verify "$T/empty"
pass "an empty ordinary folder is still a DST"

[[ $failures -eq 0 ]] || exit 1
exit 0
