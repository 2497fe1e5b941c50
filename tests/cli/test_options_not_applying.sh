#!/usr/bin/env bash
# test_options_not_applying.sh — an option that has no effect on a run is not ignored without a
# word: the tool prints one warning naming the option and why, and the exit
# status is the one of the same run without it.
set -u
B="${FL_BINARY_DIR:?FL_BINARY_DIR not set (run through ctest)}"
PD="$B/tools/packdata/packdata"
FLT="$B/tools/fastload/fastload"
TF="$B/trainer/trainfast"
FIX="$B/tests/packdata/pd_fixture"
MK="$B/tests/trainer/tf_make_dataset"
for t in "$PD" "$FLT" "$TF" "$FIX" "$MK"; do
    [[ -x "$t" ]] || { echo "SKIP: $t not built"; exit 77; }
done
T="$(mktemp -d "${TMPDIR:-/tmp}/not-applying.XXXXXX")"
trap 'rm -rf "$T"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:exitcode=86"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1:exitcode=86"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$FIX" make "$T/fx" >/dev/null || { echo "FAIL: fixture"; exit 1; }
"$PD" pack "$T/fx/png" "$T/ds" --encode raw --quiet || { echo "FAIL: pack fixture"; exit 1; }
"$MK" "$T/tr" 16 16 16 1 4 1 >/dev/null || { echo "FAIL: trainer fixture"; exit 1; }
n=0
# want OPTION WHY-SUBSTRING -- command...: exit 0 and a warning line naming OPTION
want() {
    local opt=$1 why=$2
    shift 3
    n=$((n + 1))
    "$@" >/dev/null 2>"$T/err"
    local rc=$?
    [[ $rc -eq 0 ]] || { fail "$opt: exit $rc, want 0: $*"; sed 's/^/    /' "$T/err" | head -3; return; }
    grep -q -- "warning: $opt.*$why" "$T/err" ||
        { fail "$opt: no warning containing '$why': $*"; sed 's/^/    /' "$T/err" | head -3; }
}
dst() { echo "$T/o$n"; }
want --root "ImageFolder" -- "$PD" pack "$T/fx/png" "$(dst)" --root "$T/fx" --quiet
want --root "IDX" -- "$PD" pack "$T/fx/idx" "$(dst)" --root "$T/fx" --quiet
want --split "ImageFolder" -- "$PD" pack "$T/fx/png" "$(dst)" --split train --quiet
want --split "list file" -- "$PD" pack "$T/fx/list.txt" "$(dst)" --split train --quiet
want --split "--idx" -- "$PD" pack --idx "$T/fx/idx-plain-images" "$T/fx/idx-plain-labels" "$(dst)" --split train --quiet
want --path-column "ImageFolder" -- "$PD" pack "$T/fx/png" "$(dst)" --path-column path --quiet
want --label-column "list file" -- "$PD" pack "$T/fx/list.txt" "$(dst)" --label-column label --quiet
want --cifar100-labels "CIFAR-10 " -- "$PD" pack "$T/fx/cifar10" "$(dst)" --split train --cifar100-labels coarse --quiet
want --quality "raw" -- "$PD" pack "$T/fx/png" "$(dst)" --encode raw --quality 50 --quiet
want --quality "keep" -- "$PD" pack "$T/fx/jpg" "$(dst)" --encode keep --quality 50 --quiet
want --jpeg-restart "raw" -- "$PD" pack "$T/fx/png" "$(dst)" --encode raw --jpeg-restart 4 --quiet
want --no-dictionary "zstd" -- "$PD" pack "$T/fx/jpg" "$(dst)" --no-dictionary --quiet
want --seed "shuffle" -- "$PD" pack "$T/fx/png" "$(dst)" --seed 3 --quiet
want --shard-size "lmdb" -- "$PD" pack "$T/fx/png" "$(dst)" --backend lmdb --shard-size 1M --quiet
want --scale "rrc" -- "$FLT" digest "$T/ds" --batch 4 --scale 0.5,1
want --ratio "rrc" -- "$FLT" digest "$T/ds" --batch 4 --augment center --ratio 0.5,2
want --queue-depth "pread" -- "$FLT" digest "$T/ds" --batch 4 --io pread --queue-depth 8
want --memcpy-bytes "--memcpy" -- "$FLT" bench "$T/ds" --batch 4 --memcpy-bytes 1M --quiet
want --checkpoint-every "--checkpoint" -- "$TF" train --data "$T/tr" --val "$T/tr" --epochs 1 --batch 8 \
    --width 4 --threads 1 --workers 1 --quiet --checkpoint-every 1
# an option that applies draws no warning
"$PD" pack "$T/fx/list.txt" "$T/quiet-ok" --root "$T/fx" --quiet 2>"$T/err" || fail "list + --root"
grep -q warning "$T/err" && fail "--root on a list file warned: $(cat "$T/err")"
"$PD" pack "$T/fx/png" "$T/quiet-ok2" --encode jpeg --quality 80 --shuffle --seed 3 --quiet 2>"$T/err" || fail "jpeg + --quality"
grep -q warning "$T/err" && fail "--quality with --encode jpeg warned: $(cat "$T/err")"
echo "$n cases"
if [[ $failures -ne 0 ]]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "all passed"
exit 0
