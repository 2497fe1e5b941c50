#!/usr/bin/env bash
# test_messages.sh — messages that name the reason and the next step: a reason at the end of a
# message about a 1,000-character path is not cut off; Ctrl-C during a pack says that --resume
# finishes it (and exits 130); LMDB on a full disk hints at --resume; trainfast's default --batch
# on 3 records names --batch (not a drop_last nobody set), and a one-class set is a usage error.
. "$(dirname "$0")/lib.sh"
need "$P" "$FLT" "$MKIDX" "$TF"
"$MKIDX" "$T/idx3" 3 >/dev/null && "$MKIDX" "$T/idx" 3000 >/dev/null || die "fixture"

# 1. a path of 1,000+ characters: the reason at the end of the message survives
L="$T/$(printf 'd%.0s' {1..250})/$(printf 'e%.0s' {1..250})/$(printf 'f%.0s' {1..250})/$(printf 'g%.0s' {1..250})"
mkdir -p "$L"
"$P" pack "$T/idx3" "$L/ds" --quiet 2>"$T/err" || die "pack at a long path: $(cat "$T/err")"
truncate -s -10 "$L/ds/shard-00000.fls"
expect_status 1 "info on a damaged set at a long path" -- "$P" info "$L/ds" &&
    expect_err "truncated shard" "info: the reason is not cut off" && pass "long path, info: ...$(tail -c 60 "$T/err")"
expect_status 1 "digest of a damaged set at a long path" -- "$FLT" digest "$L/ds" &&
    expect_err "truncated shard" "digest: the reason is not cut off" && pass "long path, digest: ...$(tail -c 60 "$T/err")"

# 2. Ctrl-C during a pack: exit 130 with the next step; --resume finishes it
cmd=(pack "$T/idx" "$T/ds" --compress zstd:19 --shard-size 32K --quiet)
env --default-signal=INT "$P" "${cmd[@]}" 2>"$T/int.err" &
pid=$!
for _ in $(seq 300); do
    compgen -G "$T/ds.partial/shard-*.fls" >/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
done
kill -INT $pid 2>/dev/null
wait $pid
st=$?
if [[ -d $T/ds ]]; then
    echo "note: the pack finished before Ctrl-C reached it: not judged"
elif [[ $st -ne 130 ]]; then
    fail "Ctrl-C during pack: exit $st, want 130"
elif ! grep -q -- "--resume" "$T/int.err"; then
    fail "Ctrl-C during pack: nothing says --resume finishes it: '$(cat "$T/int.err")'"
else
    pass "Ctrl-C during pack: exit 130, $(head -1 "$T/int.err")"
    expect_status 0 "the same command with --resume" -- "$P" "${cmd[@]}" --resume &&
        expect_status 0 "verify the resumed pack" -- "$P" verify "$T/ds" && pass "--resume finished the pack"
fi

# 3. LMDB on a full disk (a short write, which LMDB reports as EIO): the next step is named
if [[ -f $SHIM ]] && ! sanitized; then
    expect_status 1 "LMDB: ENOSPC" -- with_faults FL_FAULT_PATH="$T/lm.partial/data.mdb" FL_FAULT_ENOSPC_AFTER=200000 -- \
        "$P" pack "$T/idx" "$T/lm" --backend lmdb --quiet &&
        expect_err "--resume" "LMDB full disk: the hint names --resume" &&
        pass "LMDB full disk: $(grep -v error: "$T/err" | head -1 | cut -c1-140)"
else
    echo "note: no LD_PRELOAD fault injection in this build: LMDB case not run"
fi

# 4. trainfast's default --batch on 3 records; 5. one class
"$P" pack "$T/idx3" "$T/ds3" --quiet 2>/dev/null || die "pack 3"
expect_status 2 "train on 3 records with the default --batch" -- "$TF" train --data "$T/ds3" --val "$T/ds3" --epochs 1 --quiet &&
    expect_err "--batch" "names --batch" && expect_err "--batch 3 or less" "says what works" &&
    { grep -q drop_last "$T/err" && fail "still blames drop_last: $(grep error: "$T/err")" ||
          pass "3 records: $(grep error: "$T/err")"; }
if /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
    mkdir -p "$T/onesrc/cat"
    /usr/bin/python3 -c "
from PIL import Image
for i in range(4): Image.new('RGB', (8, 8), (i * 50, 0, 0)).save('$T/onesrc/cat/%d.png' % i)" || die "one-class images"
    "$P" pack "$T/onesrc" "$T/one" --quiet 2>"$T/err" || die "pack one class: $(cat "$T/err")"
    expect_status 2 "train on a one-class set" -- "$TF" train --data "$T/one" --val "$T/one" --epochs 1 --batch 2 --quiet &&
        expect_err "at least 2" "says why" && pass "one class: $(grep error: "$T/err")"
else
    echo "note: no PIL for /usr/bin/python3: one-class case not run"
fi
finish
