#!/usr/bin/env bash
# valgrind_e2e.sh — valgrind memcheck on a small end-to-end run: packdata packs a tiny synthetic
# IDX dataset (raw+zstd with a dictionary, and JPEG) and verifies it, fastload bench reads one
# epoch with --io pread (valgrind does not model io_uring fully) and digests the JPEG set with
# random-resized-crop, trainfast trains one tiny epoch on the CPU with a checkpoint, then resumes
# and evaluates. Any memcheck error (invalid access, uninitialised use, definite leak) fails.
# Usage: scripts/valgrind_e2e.sh [BUILD_DIR]   (default: build/, a non-sanitized build)
# Exit: 0 clean, 1 memcheck errors or a step failed, 77 valgrind or the tools missing.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
B="${1:-${FL_BINARY_DIR:-$root/build}}"
P="$B/tools/packdata/packdata" FLT="$B/tools/fastload/fastload" TF="$B/trainer/trainfast"
MKIDX="$B/tests/reliability/rel_make_idx"
command -v valgrind >/dev/null || { echo "SKIP: valgrind not installed"; exit 77; }
for t in "$P" "$FLT" "$TF" "$MKIDX"; do [[ -x $t ]] || { echo "SKIP: $t not built"; exit 77; }; done
if grep -q 'FL_SANITIZE:BOOL=ON\|FL_TSAN:BOOL=ON' "$B/CMakeCache.txt" 2>/dev/null; then
    echo "SKIP: $B is a sanitized build (valgrind needs a plain one)"; exit 77
fi
W="$(mktemp -d "${TMPDIR:-/tmp}/fl-valgrind.XXXXXX")"
trap 'rm -rf "$W"' EXIT
VG=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --track-origins=yes --num-callers=30 --quiet
    --suppressions="$root/scripts/valgrind.supp")
failed=0 n=0
# vg NAME command...: run one step under memcheck, log in $W/NAME.log
vg() {
    local name=$1
    shift
    n=$((n + 1))
    local t0=$SECONDS
    "${VG[@]}" --log-file="$W/$name.log" "$@" >"$W/$name.out" 2>"$W/$name.err"
    local rc=$?
    if [[ $rc -eq 0 && ! -s $W/$name.log ]]; then
        echo "clean  $name ($((SECONDS - t0)) s)"
    else
        failed=$((failed + 1))
        echo "FAIL   $name: exit $rc ($((SECONDS - t0)) s)"
        sed 's/^/    /' "$W/$name.log" | head -60
        sed 's/^/    stderr: /' "$W/$name.err" | tail -5
    fi
}

"$MKIDX" "$W/idx" 300 || { echo "FAIL: fixture"; exit 1; }
"$MKIDX" "$W/vidx" 100 28 28 2 || { echo "FAIL: fixture"; exit 1; }
vg pack-raw "$P" pack "$W/idx" "$W/raw" --shard-size 64K --workers 2 --quiet
vg pack-jpeg "$P" pack "$W/idx" "$W/jpeg" --encode jpeg --workers 2 --quiet
vg pack-val "$P" pack "$W/vidx" "$W/val" --compress none --quiet
vg verify "$P" verify "$W/jpeg" --decode
vg bench-pread "$FLT" bench "$W/raw" --io pread --epochs 1 --batch 32 --workers 2 --quiet
vg digest-jpeg-rrc "$FLT" digest "$W/jpeg" --io pread --augment rrc,flip --size 24 --batch 32 --workers 2
tr=(--data "$W/raw" --val "$W/val" --device cpu --width 4 --batch 50 --threads 1 --seed 1 --quiet)
vg train "$TF" train "${tr[@]}" --epochs 2 --checkpoint "$W/ck"
# --resume continues only the same run (same --epochs): drop the final checkpoint so the resumed
# run trains epoch 2 again from the end-of-epoch-1 one
rm -f "$(ls "$W"/ck/ckpt-*.tfc | sort | tail -n 1)"
vg train-resume "$TF" train "${tr[@]}" --epochs 2 --checkpoint "$W/ck" --resume
ck=$(ls "$W"/ck/ckpt-*.tfc 2>/dev/null | sort | tail -n 1)
vg eval "$TF" eval "$ck" "$W/val" --batch 50
echo "valgrind_e2e: $((n - failed)) of $n steps clean under memcheck"
((failed == 0))
