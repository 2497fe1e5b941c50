# lib.sh — shared setup for the reliability shell tests: tool paths, a temp work dir, the
# fault-injection shim, assertions, and dataset comparison. Sourced by test_*.sh.
# Exit codes: 0 pass, 1 fail, 77 skip (the tools or the shim are not built, or the build is
# sanitized where the test needs LD_PRELOAD).
set -u
B="${FL_BINARY_DIR:?FL_BINARY_DIR not set (run through ctest)}"
P="$B/tools/packdata/packdata"
FLT="$B/tools/fastload/fastload"
TF="$B/trainer/trainfast"
MKIDX="$B/tests/reliability/rel_make_idx"
SHIM="$B/tests/reliability/fault_inject.so"
LONG="${FL_LONG_TESTS:-0}"
[[ $LONG == 1 || $LONG == ON || $LONG == on ]] && LONG=1 || LONG=0
T="$(mktemp -d "${TMPDIR:-/tmp}/fl-rel.XXXXXX")"
cleanup_hooks=()
on_exit() {
    local h
    for h in "${cleanup_hooks[@]+"${cleanup_hooks[@]}"}"; do eval "$h"; done
    rm -rf "$T"
}
trap on_exit EXIT
failures=0
# Tests here compare packs byte for byte across runs: give every pack the same dataset id (the
# writer picks a random one otherwise). Tests about dataset ids unset it.
export FL_DATASET_ID=0123456789abcdef0123456789abcdef

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

# need TOOL...: skip unless each path is an executable
need() {
    local t
    for t in "$@"; do [[ -x $t ]] || skip "$t not built"; done
}

# need_preload: LD_PRELOAD of the shim does not mix with ASan/TSan runtimes
need_preload() {
    [[ -f $SHIM ]] || skip "$SHIM not built"
    case "${FL_SANITIZE:-}" in ON|on|1|TRUE|true|YES|yes) skip "sanitized build: LD_PRELOAD fault injection runs in the plain build only" ;; esac
    case "${FL_TSAN:-}" in ON|on|1|TRUE|true|YES|yes) skip "TSan build: LD_PRELOAD fault injection runs in the plain build only" ;; esac
}

# need_pil: skip unless Debian's python3 has PIL; sets PY to it (the fixture images' writer)
need_pil() {
    PY=/usr/bin/python3
    "$PY" -c 'import PIL' 2>/dev/null || skip "$PY lacks PIL"
}

# sanitized: true in ASan/TSan builds (slow: tests shrink their loops)
sanitized() {
    case "${FL_SANITIZE:-}${FL_TSAN:-}" in *ON*|*on*|*1*|*TRUE*|*true*|*YES*|*yes*) return 0 ;; esac
    return 1
}

. "$(dirname "${BASH_SOURCE[0]}")/../lib/expect.sh"

# with_faults VAR=VALUE... -- command...: run command with the shim preloaded
with_faults() {
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" LD_PRELOAD="$SHIM" "$@"
}

# same_dataset A B: shards (and LMDB files) byte-identical, manifests identical but for "created"
same_dataset() {
    local a=$1 b=$2 f
    [[ -d $a && -d $b ]] || { echo "not both directories: $a $b"; return 1; }
    [[ "$(cd "$a" && ls)" == "$(cd "$b" && ls)" ]] || { echo "file lists differ: $(cd "$a" && ls | tr '\n' ' ') / $(cd "$b" && ls | tr '\n' ' ')"; return 1; }
    for f in "$a"/*; do
        f=$(basename "$f")
        if [[ $f == manifest.json ]]; then
            cmp -s <(grep -v '"created"' "$a/$f") <(grep -v '"created"' "$b/$f") || { echo "$f differs (beyond created)"; return 1; }
        else
            cmp -s "$a/$f" "$b/$f" || { echo "$f differs"; return 1; }
        fi
    done
    return 0
}

finish() {
    if [[ $failures -ne 0 ]]; then
        echo "$failures failure(s)"
        exit 1
    fi
    echo "all passed"
    exit 0
}

# make_train_data DIR NTRAIN NVAL: DIR/train and DIR/val, packed raw 28x28 gray, 10 classes
make_train_data() {
    mkdir -p "$1" || return 1
    "$MKIDX" "$1/train-idx" "$2" 28 28 1 >/dev/null || return 1
    "$MKIDX" "$1/val-idx" "$3" 28 28 2 >/dev/null || return 1
    "$P" pack "$1/train-idx" "$1/train" --compress none --quiet 2>/dev/null || return 1
    "$P" pack "$1/val-idx" "$1/val" --compress none --quiet 2>/dev/null || return 1
}

# train_reference NTRAIN NVAL EPOCHS DIR: make_train_data "$T/data" NTRAIN NVAL, set the array
# `common` to the trainfast train options of the checkpoint tests (width 8, batch 50, EPOCHS
# epochs, seed 7, a checkpoint every 10 steps) and train with them, checkpointing into DIR; dies
# when any step fails
train_reference() {
    make_train_data "$T/data" "$1" "$2" || die "fixture"
    common=(--data "$T/data/train" --val "$T/data/val" --width 8 --batch 50 --epochs "$3" --seed 7
            --threads 2 --quiet --checkpoint-every 10)
    "$TF" train "${common[@]}" --checkpoint "$4" 2>"$T/err" || die "reference run: $(cat "$T/err")"
}

# newest_ckpt DIR: path of the newest ckpt-*.tfc (empty when none)
newest_ckpt() {
    local f=("$1"/ckpt-*.tfc)
    (( ${#f[@]} )) && [[ -e ${f[0]} ]] && printf '%s\n' "${f[@]}" | sort | tail -n 1
}

# same_weights A B: the trainer's checkpoint comparator when built, else eval figures
same_weights() {
    local cmpt="$B/tests/trainer/tf_ckpt_compare"
    if [[ -x $cmpt ]]; then
        "$cmpt" "$1" "$2" >/dev/null
    else
        [[ "$("$TF" eval "$1" "$T/data/val" --json 2>/dev/null)" == "$("$TF" eval "$2" "$T/data/val" --json 2>/dev/null)" ]]
    fi
}
