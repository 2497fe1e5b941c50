#!/usr/bin/env bash
# test_omp_policy.sh — trainfast's OpenMP wait policy: a command that computes on the CPU (train,
# eval, predict) runs with OMP_WAIT_POLICY=passive unless the user set OMP_WAIT_POLICY or
# GOMP_SPINCOUNT (then theirs stands); other commands are left alone. Read from libgomp's own
# report (OMP_DISPLAY_ENV=verbose, printed as it loads: once per exec). Skips (77) when trainfast
# is built without oneDNN (no OpenMP runtime to set).
set -u
B="${FL_BINARY_DIR:?}"
T="$B/trainer/trainfast"
[[ -x "$T" ]] || { echo "SKIP: $T not built"; exit 77; }
spin() { env "$@" OMP_DISPLAY_ENV=verbose "$T" "${CMD[@]}" 2>&1 | sed -n "s/.*GOMP_SPINCOUNT = '\([0-9]*\)'.*/\1/p" | tr '\n' ' '; }
CMD=(train --help)
[[ -n "$(spin)" ]] || { echo "SKIP: trainfast has no OpenMP runtime (built without oneDNN)"; exit 77; }
fail=0
check() { # what want got
    if [[ "$3" == "$2" ]]; then echo "ok   $1: $3"; else echo "FAIL: $1: got '$3', want '$2'"; fail=1; fi
}
# by default: loaded with libgomp's default spin, then re-executed once, passive (no spin)
check "train, default" "300000 0 " "$(spin)"
CMD=(eval --help)
check "eval, default" "300000 0 " "$(spin)"
CMD=(predict --help)
check "predict, default" "300000 0 " "$(spin)"
CMD=(train --help)
check "train, GOMP_SPINCOUNT=12345" "12345 " "$(spin GOMP_SPINCOUNT=12345)"
n=$(spin OMP_WAIT_POLICY=active | wc -w)
check "train, OMP_WAIT_POLICY=active: loaded once, not re-executed" 1 "$n"
CMD=(doctor --help)
check "doctor (computes nothing): untouched" "300000 " "$(spin)"
exit $fail
