#!/usr/bin/env bash
# test_epochs_auto.sh — `trainfast train --epochs auto` (the default) as a user sees it: the
# resolved number printed at the start ("50,000 images: 3 epochs, 300 steps"), in --json, in every
# --log line and in the checkpoint's config; --epochs N unchanged (no auto line, N epochs); a
# resumed run keeps the checkpoint's number (a run begun with --epochs 2 and resumed with the
# default trains to 2, not to auto's 3) and --epochs N against it is refused; bad values exit 2.
# The budget rule itself (several sizes, the warm-up floor): test_epoch_budget.c. Expected figures
# assume TF_AUTO_SAMPLES = 120,000 (trainer/train/epoch_budget.h): 50,000 samples -> 3 epochs.
# Batches of 5,000 keep it to 70 steps. It runs the reference CPU path unless the caller sets
# FASTLOAD_CPU_BACKEND: what it checks is the epoch count, not the layers (test_trainer_onednn_grads
# compares the paths), and oneDNN's kernels for these 1- and 4-channel layers took 30x the
# reference's CPU time when this was written (run the suite with FASTLOAD_CPU_BACKEND=onednn to
# drive it through oneDNN anyway).
set -u
export FASTLOAD_CPU_BACKEND="${FASTLOAD_CPU_BACKEND:-reference}"
B="${FL_BINARY_DIR:?}"
TF="$B/trainer/trainfast"
MK="$B/tests/trainer/tf_make_dataset"
T="$(mktemp -d "${TMPDIR:-/tmp}/tf_epochs_auto.XXXXXX")"
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
. "$(dirname "${BASH_SOURCE[0]}")/../lib/expect.sh"
json_field() { sed -n "s/.*\"$1\":\([0-9a-z.e+-]*\).*/\1/p" <<< "$2"; }

"$MK" "$T/train" 50000 8 8 1 4 1 > /dev/null || { echo "FAIL: fixture"; exit 1; }
"$MK" "$T/val" 200 8 8 1 4 2 > /dev/null || { echo "FAIL: fixture"; exit 1; }
common=(--data "$T/train" --val "$T/val" --width 4 --batch 5000 --seed 3 --threads 2 --no-tta)

# 1. the default: auto, printed, in --json, --log and the checkpoint
if expect_status 0 "auto run" -- "$TF" train "${common[@]}" --json --log "$T/a.jsonl" \
        --checkpoint "$T/ck"; then
    expect_err "trainfast: 50,000 images: 3 epochs, 30 steps (--epochs auto: 120,000 samples" \
        "auto line"
    grep -q "| batch 5000 x 1 accum, 3 epochs," "$T/err" || fail "banner lacks 3 epochs"
    last=$(tail -n 1 "$T/out")
    [[ $(json_field epochs "$last") == 3 ]] || fail "JSON epochs: $last"
    [[ $(json_field epochs_auto "$last") == true ]] || fail "JSON epochs_auto: $last"
    [[ $(wc -l < "$T/a.jsonl") -eq 3 ]] || fail "--log has $(wc -l < "$T/a.jsonl") lines, want 3"
    [[ $(grep -c '"epochs":3[,}]' "$T/a.jsonl") -eq 3 ]] || fail "--log lines lack epochs 3"
    ls "$T/ck"/ckpt-*.tfc > /dev/null 2>&1 || fail "no checkpoint written"
    echo "ok   auto: $(grep 'epochs auto' "$T/err")"
fi

# 2. the checkpoint recorded the resolved number: resuming with --epochs 3 is the same run, with
#    --epochs 4 it is refused naming the checkpoint's 3
expect_status 0 "resume --epochs 3 of an auto run" -- "$TF" train "${common[@]}" \
    --checkpoint "$T/ck" --resume --epochs 3 --quiet
expect_status 2 "resume --epochs 4 of an auto run" -- "$TF" train "${common[@]}" \
    --checkpoint "$T/ck" --resume --epochs 4 &&
    expect_err "--epochs 4 differs from the checkpoint's --epochs 3" "refusal"

# 3. --epochs N as before: N epochs, no auto line, epochs_auto false
if expect_status 0 "--epochs 1" -- "$TF" train "${common[@]}" --epochs 1 --json; then
    grep -q "epochs auto" "$T/err" && fail "--epochs 1 printed the auto line"
    last=$(tail -n 1 "$T/out")
    [[ $(json_field epochs "$last") == 1 && $(json_field epochs_auto "$last") == false ]] ||
        fail "--epochs 1 JSON: $last"
    echo "ok   --epochs 1: one epoch, no auto line"
fi

# 4. resume keeps the checkpoint's number: a run begun with --epochs 2, resumed from its epoch-1
#    checkpoint (copied aside; trainfast keeps the newest two) with the default, which would
#    resolve to 3, trains epoch 2 and stops there
expect_status 0 "--epochs 2 run" -- "$TF" train "${common[@]}" --epochs 2 --checkpoint "$T/c5" \
    --quiet
first=$(ls "$T/c5"/ckpt-*.tfc | sort | head -n 1)
mkdir -p "$T/c5b" && cp "$first" "$T/c5b/"
if expect_status 0 "resume with auto" -- "$TF" train "${common[@]}" --checkpoint "$T/c5b" \
        --resume --json; then
    expect_err "2 epochs" "resumed banner"
    expect_err "resumed: the checkpoint's" "auto line on resume"
    last=$(tail -n 1 "$T/out")
    [[ $(json_field epochs "$last") == 2 ]] || fail "resumed run's epochs: $last"
    # the resumed run wrote epoch 2's checkpoint, as the uninterrupted one did, and no more
    [[ $(ls "$T/c5b"/ckpt-*.tfc | wc -l) -eq $(ls "$T/c5"/ckpt-*.tfc | wc -l) ]] ||
        fail "resumed run wrote $(ls "$T/c5b" | tr '\n' ' '), the whole run $(ls "$T/c5" | tr '\n' ' ')"
    echo "ok   resume keeps the checkpoint's 2 epochs"
fi

# 5. bad values: exit 2 with a message naming --epochs
for bad in 0 -1 100001 abc 2.5 "" autox; do
    expect_status 2 "--epochs '$bad'" -- "$TF" train "${common[@]}" --epochs "$bad" &&
        expect_err "--epochs" "--epochs '$bad' message"
done
"$TF" train --help | grep -A1 -- "--epochs E|auto" | grep -q "(default: auto)" ||
    fail "--help: $("$TF" train --help | grep -A1 -- --epochs)"

[[ $fails -eq 0 ]] || exit 1
echo "PASS test_epochs_auto"
