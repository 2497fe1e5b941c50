#!/usr/bin/env bash
# test_valgrind.sh — runs scripts/valgrind_e2e.sh (memcheck over pack, verify, bench --io pread,
# digest with RRC, train, resume, eval) against this build. Slow (about a minute on 2 cores), so
# only with FL_LONG_TESTS=1 and valgrind installed, in non-sanitized builds; skips (77) otherwise.
. "$(dirname "$0")/lib.sh"
((LONG)) || skip "valgrind end-to-end runs with FL_LONG_TESTS=1"
command -v valgrind >/dev/null || skip "valgrind not installed"
sanitized && skip "sanitized build: valgrind needs a plain one"
bash "${FL_SOURCE_DIR:?}/scripts/valgrind_e2e.sh" "$B"
