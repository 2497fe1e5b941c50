#!/usr/bin/env bash
# test_resume_complete.sh — a job script that always passes --resume (a requeued Slurm job, a
# restarted spot instance) succeeds after its first success: --resume on a
# finished dataset of the same options and inputs exits 0 "already complete" without touching it
# (--quiet: prints nothing; --json: an object saying so); with another option or other inputs it
# exits 2 naming the option or the input change; without --resume an existing DST still needs
# --force; --force --resume of the same job is also a no-op, of another job a replacement.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX"
"$MKIDX" "$T/idx" 400 >/dev/null || die "fixture"
args=(--compress zstd:3 --shard-size 64K --shuffle --seed 3)
fingerprint() { (cd "$1" && find . -printf '%p %s %T@ %i\n' | sort && find . -type f -print0 | sort -z | xargs -0r sha256sum); }

"$P" pack "$T/idx" "$T/ds" "${args[@]}" --quiet 2>"$T/err" || die "first pack: $(cat "$T/err")"
ref=$(fingerprint "$T/ds")
expect_status 0 "--resume on the finished dataset" -- "$P" pack "$T/idx" "$T/ds" "${args[@]}" --resume
grep -q "already complete" "$T/out" "$T/err" || fail "--resume on a finished dataset does not say it is complete: $(cat "$T/out" "$T/err")"
expect_status 0 "--resume --quiet" -- "$P" pack "$T/idx" "$T/ds" "${args[@]}" --resume --quiet
[[ ! -s $T/out && ! -s $T/err ]] || fail "--resume --quiet printed: $(cat "$T/out" "$T/err")"
expect_status 0 "--resume --json" -- "$P" pack "$T/idx" "$T/ds" "${args[@]}" --resume --json
grep -q '"already_complete": *true' "$T/out" || fail "--resume --json: $(cat "$T/out")"
grep -q '"records": *400' "$T/out" || fail "--resume --json lacks the record count: $(cat "$T/out")"
expect_status 0 "--force --resume on the finished dataset" -- "$P" pack "$T/idx" "$T/ds" "${args[@]}" --resume --force --quiet
[[ $ref == "$(fingerprint "$T/ds")" ]] || fail "a no-op --resume touched the dataset"
[[ ! -e $T/ds.partial && ! -e $T/ds.lock ]] || fail "a no-op --resume left ds.partial or ds.lock"
pass "--resume on a finished dataset of the same job: exit 0, untouched"

# a run killed after it published DST but before it removed its whole plan (ds.partial.plan):
# the next --resume finds the job complete and removes the plan, nothing else
printf 'left by a killed run\n' >"$T/ds.partial.plan"
expect_status 0 "--resume with a stale ds.partial.plan" -- "$P" pack "$T/idx" "$T/ds" "${args[@]}" --resume --quiet
[[ ! -e $T/ds.partial.plan ]] || fail "--resume on the finished dataset left the killed run's ds.partial.plan"
[[ $ref == "$(fingerprint "$T/ds")" ]] || fail "removing a stale plan touched the dataset"
pass "--resume on a finished dataset removes a stale ds.partial.plan"

# another option: exit 2, named; the dataset untouched
expect_status 2 "--resume with another seed" -- "$P" pack "$T/idx" "$T/ds" --compress zstd:3 --shard-size 64K --shuffle --seed 4 --resume --quiet &&
    expect_err 'option "seed" differs: 3 in' "the seed is named"
expect_status 2 "--resume with another level" -- "$P" pack "$T/idx" "$T/ds" --compress zstd:5 --shard-size 64K --shuffle --seed 3 --resume --quiet &&
    expect_err 'option "compress" differs' "the compression is named"
# other inputs: exit 2, named
"$MKIDX" "$T/idx2" 450 >/dev/null || die "fixture 2"
expect_status 2 "--resume with more inputs" -- "$P" pack "$T/idx2" "$T/ds" "${args[@]}" --resume --quiet &&
    expect_err "it was packed from 400 inputs, SRC now has 450" "the input change is named"
"$MKIDX" "$T/idx3" 400 28 28 9 >/dev/null || die "fixture 3"
expect_status 2 "--resume with other pixels" -- "$P" pack "$T/idx3" "$T/ds" "${args[@]}" --resume --quiet &&
    expect_err "inputs changed since it was packed" "changed inputs are named"
[[ $ref == "$(fingerprint "$T/ds")" ]] || fail "a refused --resume touched the dataset"
pass "--resume on a finished dataset of another job: exit 2 naming the difference, untouched"

# without --resume an existing dataset still needs --force
expect_status 1 "existing DST without --force" -- "$P" pack "$T/idx" "$T/ds" "${args[@]}" --quiet &&
    expect_err "already exists: pass --force" "--force is asked for"
# --force --resume of another job replaces it
expect_status 0 "--force --resume with another seed" -- "$P" pack "$T/idx" "$T/ds" --compress zstd:3 --shard-size 64K --shuffle --seed 4 --resume --force --quiet
grep -q '"seed": *4' "$T/ds/manifest.json" || fail "--force --resume did not replace the dataset"
expect_status 0 "verify after the replacement" -- "$P" verify "$T/ds"
pass "without --resume --force is needed; --force --resume of another job replaces"

# a dataset packed before inputs were recorded: --resume cannot tell, says so (exit 2)
sed -i 's/, *"inputs": *{[^}]*}//' "$T/ds/manifest.json"
expect_status 2 "--resume on a dataset without an inputs digest" -- "$P" pack "$T/idx" "$T/ds" --compress zstd:3 --shard-size 64K --shuffle --seed 4 --resume --quiet &&
    expect_err "records no digest of its inputs" "the missing digest is named"
pass "a dataset without an inputs digest is refused with a reason"
finish
