#!/usr/bin/env bash
# test_checkpoint_unwritable.sh — `trainfast train --checkpoint DIR` where DIR cannot take a
# checkpoint (a path under a regular file, a missing parent, a read-only folder) fails before the
# first step, like --log does, naming DIR — not after an epoch whose work is then lost.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$TF"
make_train_data "$T/data" 300 100 || die "fixture"
common=(--data "$T/data/train" --val "$T/data/val" --width 4 --batch 50 --epochs 2 --seed 1
        --threads 2 --quiet)
: >"$T/file"

# refused_early DESCRIPTION DIR: exit 1 naming DIR, and no epoch ran (the --log has no line)
refused_early() {
    local what=$1 dir=$2
    rm -f "$T/log"
    expect_status 1 "$what" -- "$TF" train "${common[@]}" --checkpoint "$dir" --log "$T/log" || return
    expect_err "$dir" "$what: the error names the folder" || return
    if [[ -s $T/log ]] || grep -q "^epoch" "$T/out" "$T/err"; then
        fail "$what: refused only after training ($(head -c 80 "$T/log" 2>/dev/null))"
    else
        pass "$what: refused before the first step: $(grep error: "$T/err" | head -1)"
    fi
}
refused_early "--checkpoint under a regular file" "$T/file/ck"
refused_early "--checkpoint with a missing parent" "$T/none/ck"
refused_early "--checkpoint naming a regular file" "$T/file"
mkdir -p "$T/ro"
if mount -t tmpfs -o ro,size=1m tmpfs "$T/ro" 2>/dev/null; then
    cleanup_hooks+=("umount '$T/ro' 2>/dev/null")
    refused_early "--checkpoint on a read-only file system" "$T/ro/ck"
elif [[ $(id -u) -ne 0 ]]; then
    chmod 555 "$T/ro"
    refused_early "--checkpoint in a read-only folder" "$T/ro/ck"
    chmod 755 "$T/ro"
else
    echo "note: cannot mount a read-only tmpfs here: read-only case not run"
fi
# a folder that does not exist yet (its parent does) is created, and training runs
expect_status 0 "--checkpoint DIR created on demand" -- "$TF" train "${common[@]}" --checkpoint "$T/newck" &&
    [[ -n $(newest_ckpt "$T/newck") ]] && pass "a checkpoint is written into a new folder" || true
finish
