#!/usr/bin/env bash
# test_resume_repacked.sh — `trainfast train --resume` after `packdata pack --force` re-packed the
# training set from the same inputs with the same options: the dataset has a new dataset_id but
# the same records, so the run continues (saying the set was re-packed) and ends bit-identical to
# an uninterrupted run; re-packed with another option, it is still refused naming --data.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$TF"
unset FL_DATASET_ID # real, random dataset ids: a re-pack gets a new one
make_train_data "$T/data" 300 100 || die "fixture"
common=(--data "$T/data/train" --val "$T/data/val" --width 4 --batch 50 --epochs 2 --seed 1
        --threads 2 --quiet --checkpoint-every 3)
"$TF" train "${common[@]}" --checkpoint "$T/ref" >/dev/null 2>"$T/err" || die "reference run: $(cat "$T/err")"
want=$(newest_ckpt "$T/ref")
cp -r "$T/ref" "$T/c"
rm -f "$T/c/$(basename "$want")" # interrupted after the checkpoint before the last
id_of() { grep -o '"dataset_id": *"[0-9a-f]*"' "$1/manifest.json"; }
id0=$(id_of "$T/data/train")
"$P" pack "$T/data/train-idx" "$T/data/train" --compress none --quiet --force 2>"$T/err" || die "re-pack: $(cat "$T/err")"
[[ $(id_of "$T/data/train") != "$id0" ]] || die "the re-pack kept its dataset_id: nothing to test"
expect_status 0 "--resume after a re-pack of the same inputs and options" -- \
    "$TF" train "${common[@]}" --checkpoint "$T/c" --resume &&
    expect_err "re-packed" "--resume says the dataset was re-packed" &&
    pass "resumed: $(grep -i 're-packed' "$T/err" | head -1)"
got=$(newest_ckpt "$T/c")
[[ $(basename "$got") == $(basename "$want") ]] && same_weights "$got" "$want" &&
    pass "the resumed run ends bit-identical to the uninterrupted one" ||
    fail "resumed run ends at $(basename "$got") and differs from $(basename "$want")"

# the same inputs with another option: other records, refused
rm -f "$T/c/$(basename "$want")"
"$P" pack "$T/data/train-idx" "$T/data/train" --compress none --shuffle --seed 5 --quiet --force 2>"$T/err" ||
    die "re-pack shuffled: $(cat "$T/err")"
expect_status 2 "--resume after a re-pack with another option" -- \
    "$TF" train "${common[@]}" --checkpoint "$T/c" --resume && expect_err "--data" "the refusal names --data" &&
    pass "refused: $(grep error: "$T/err" | head -1 | cut -c1-160)"
finish
