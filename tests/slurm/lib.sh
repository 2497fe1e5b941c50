# lib.sh — shared setup of the Slurm tests: tool paths, a temp dir, and a private one-node Slurm
# cluster (tests/slurm/cluster.sh) started for the test and stopped on exit. Sourced by test_*.sh;
# exits 77 (skip) when slurm-wlm/munge are missing or not root, or the tools are not built.
set -u
B="${FL_BINARY_DIR:?FL_BINARY_DIR not set (run through ctest)}"
SRC_DIR="${FL_SOURCE_DIR:?FL_SOURCE_DIR not set (run through ctest)}"
P="$B/tools/packdata/packdata"
FLT="$B/tools/fastload/fastload"
TF="$B/trainer/trainfast"
CLUSTER="$SRC_DIR/tests/slurm/cluster.sh"
# the three tests take 50-130 s together on 2 shared cores (more than the default run's minute)
if [[ ${FL_LONG_TESTS:-0} != 1 ]]; then
    echo "SKIP: the Slurm tests run with FL_LONG_TESTS=1 (scripts/test.sh --long; or FL_LONG_TESTS=1 ctest -L slurm)"
    exit 77
fi
why=$(bash "$CLUSTER" check) || { echo "SKIP: $why"; exit 77; }
W="$(mktemp -d "${TMPDIR:-/tmp}/fl-slurm.XXXXXX")"
cleanup() {
    bash "$CLUSTER" stop "$W/cluster" >/dev/null 2>&1
    rm -rf "$W"
}
trap cleanup EXIT
# OpenMPI's and python's own allocations look like leaks to LeakSanitizer; the rest stays on
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
die() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }
t_start=$(date +%s.%N)
elapsed() { awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
finish() {
    echo "$(elapsed) s in all"
    if [[ $failures -ne 0 ]]; then
        echo "$failures failure(s)"
        for f in "$W"/cluster/log/slurmctld.log "$W"/cluster/log/slurmd.log; do
            echo "--- tail of $f"; tail -n 15 "$f"
        done
        exit 1
    fi
    echo "all passed"
    exit 0
}

start_cluster() {
    bash "$CLUSTER" start "$W/cluster" || die "the test cluster did not start"
    . "$W/cluster/env.sh"
}

# job_state JOBID: the job's state (PENDING, RUNNING, COMPLETED, CANCELLED, FAILED...)
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1; }

# wait_gone JOBID SECONDS: wait until no task of the job is pending or running
wait_gone() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        [[ -z $(squeue -h -j "$1" -o %i 2>/dev/null) ]] && return 0
        sleep 0.1
    done
    return 1
}
