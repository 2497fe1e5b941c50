#!/usr/bin/env bash
# test_force_resume_hint.sh — after a failed `packdata pack ... --force` (replacing an existing
# dataset; ENOSPC injected by the LD_PRELOAD shim), the hint packdata prints must work: when it
# says to run the same command with --resume, that command completes the replacement.
# Regression test of a finding (docs/RELIABILITY.md): the hint said "--resume", but
# `--force --resume` was refused as contradictory (fixed in 240dfd8).
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX"
need_preload
"$MKIDX" "$T/idx" 2000 || die "fixture"
args=(--compress zstd:3 --shard-size 128K --quiet)
"$P" pack "$T/idx" "$T/ds" "${args[@]}" 2>"$T/err" || die "first pack: $(cat "$T/err")"
"$P" pack "$T/idx" "$T/want" "${args[@]}" --shuffle --seed 9 2>"$T/err" || die "reference: $(cat "$T/err")"
cmd=(pack "$T/idx" "$T/ds" "${args[@]}" --shuffle --seed 9 --force)
expect_status 1 "--force replacement with ENOSPC" -- with_faults FL_FAULT_PATH="$T/ds.partial" \
    FL_FAULT_ENOSPC_AFTER=400000 -- "$P" "${cmd[@]}"
expect_err "No space left on device" "error names the cause"
hint=$(grep -v 'error:' "$T/err" | head -1)
if grep -q -- "--resume" <<<"$hint"; then
    expect_status 0 "following the hint: the same command with --resume ('$hint')" -- "$P" "${cmd[@]}" --resume &&
        { msg=$(same_dataset "$T/want" "$T/ds") || fail "the resumed replacement differs from a direct pack: $msg"; }
else
    pass "hint does not suggest --resume: '$hint'"
fi
finish
