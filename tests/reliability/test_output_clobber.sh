#!/usr/bin/env bash
# test_output_clobber.sh — an output path that names an input: `trainfast predict CKPT DATA
# --csv DATA/manifest.json` (or a shard), `--logits CKPT`, `--csv IMAGE` over that image,
# `export CKPT -o CKPT`, `packdata extract DST 0 -o DST/manifest.json`, `trainfast train --log`
# or `--report` into --data/--val, `packdata pack LIST DST --report LIST` (or `--report DST`
# before DST exists: the report took DST's name and the pack failed). Each replaced (or
# truncated) the input and mostly exited 0: the dataset, checkpoint, image or list was gone
# ("not a trainfast checkpoint (bad magic)", "JSON byte 0"). Now refused up front (exit 2,
# naming both), the input byte-identical; outputs elsewhere still written.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$TF"
make_train_data "$T/data" 200 60 || die "fixture"
"$TF" train --data "$T/data/train" --val "$T/data/val" --width 4 --batch 50 --epochs 1 --seed 1 \
    --threads 2 --quiet --checkpoint "$T/ck" 2>"$T/err" || die "train: $(cat "$T/err")"
ck=$(newest_ckpt "$T/ck")
D="$T/data/val"
"$P" extract "$D" 0 -o "$T/img.png" >/dev/null 2>&1 || die "extract"
sums() { (cd "$T" && sha256sum data/val/* ck/* img.png); }
before=$(sums)

refused() { # DESCRIPTION SUBSTRING -- command...
    local what=$1 sub=$2
    shift 3
    expect_status 2 "$what" -- "$@" || return
    expect_err "$sub" "$what: the error says which input" || return
    expect_err "nothing was" "$what: the error says nothing was written" || return
    pass "$what: $(grep error: "$T/err" | head -1 | sed "s|$T/||g")"
}
refused "predict --csv DATA/manifest.json" "is in the folder of the dataset $D" -- \
    "$TF" predict "$ck" "$D" --csv "$D/manifest.json"
refused "predict --logits DATA/shard" "is in the folder of the dataset $D" -- \
    "$TF" predict "$ck" "$D" --logits "$(ls "$D"/shard-*.fls | head -1)"
refused "predict --csv DATA/new.csv" "is in the folder of the dataset $D" -- \
    "$TF" predict "$ck" "$D" --csv "$D/new.csv"
refused "predict --logits CKPT" "is the checkpoint $ck" -- "$TF" predict "$ck" "$D" --logits "$ck"
refused "predict DIR --logits its newest checkpoint" "is the checkpoint" -- \
    "$TF" predict "$T/ck" "$D" --logits "$ck"
ln -s "$ck" "$T/link.npy"
refused "predict --logits a link to CKPT" "is the checkpoint" -- \
    "$TF" predict "$ck" "$D" --logits "$T/link.npy"
refused "predict IMAGE --csv IMAGE" "is the input $T/img.png" -- \
    "$TF" predict "$ck" "$T/img.png" --csv "$T/img.png"
refused "export CKPT -o CKPT" "is the checkpoint $ck" -- "$TF" export "$ck" -o "$ck"
refused "extract -o DATA/manifest.json" "is in the folder of the dataset $D" -- \
    "$P" extract "$D" 0 -o "$D/manifest.json"
common=(--data "$T/data/train" --val "$D" --width 4 --batch 50 --epochs 1 --seed 1 --threads 2 --quiet)
expect_status 2 "train --log VAL/manifest.json" -- "$TF" train "${common[@]}" --log "$D/manifest.json" &&
    expect_err "is in the folder of the dataset --val $D" "train --log: the error names --val" &&
    pass "train --log into the dataset is refused"
expect_status 2 "train --report VAL/r.html" -- "$TF" train "${common[@]}" --report "$D/r.html" &&
    expect_err "is in the folder of the dataset --val $D" "train --report: the error names --val" &&
    pass "train --report into the dataset is refused"
# packdata pack --report naming its own input list: "w" erased the list before it was read
printf '%s 0\n' img.png >"$T/list.txt"
cp "$T/list.txt" "$T/list.bak"
refused "pack --report LIST" "would overwrite the input $T/list.txt" -- \
    "$P" pack "$T/list.txt" "$T/packed" --report "$T/list.txt"
cmp -s "$T/list.txt" "$T/list.bak" || fail "pack --report LIST: the list changed"
[[ ! -e $T/packed && ! -e $T/packed.partial ]] || fail "pack --report LIST: something was written at DST"
# packdata pack --report naming the destination (not there yet) or its partial folder: the report
# file took DST's name, then the pack failed "DST is not a folder" and left the file behind
mkdir -p "$T/rsrc/a" "$T/rsrc/b"
printf x >"$T/rsrc/a/1.png" # refused before any input is read
for r in "$T/newdst" "$T/newdst/" "$T/../$(basename "$T")/newdst" "$T/newdst.partial"; do
    refused "pack --report ${r#$T/}" "names the destination" -- "$P" pack "$T/rsrc" "$T/newdst" --report "$r"
    [[ ! -e $T/newdst && ! -e $T/newdst.partial ]] || fail "pack --report ${r#$T/}: something was written at DST"
    rm -rf "$T/newdst" "$T/newdst.partial"
done
[[ -z $(ls "$D" | grep -v -e '^manifest.json$' -e '^shard-') ]] || fail "a file was added to the dataset folder: $(ls "$D")"
[[ ! -e $D/new.csv ]] || fail "a file was added to the dataset folder"
[[ $(sums) == "$before" ]] || fail "an input changed"
expect_status 0 "the dataset still verifies" -- "$P" verify "$D"

# outputs elsewhere are written as before
expect_status 0 "predict with outputs beside the inputs" -- \
    "$TF" predict "$ck" "$D" --csv "$T/p.csv" --logits "$T/p.npy" &&
    [[ -s $T/p.csv && -s $T/p.npy ]] && pass "outputs outside the inputs are written"
expect_status 0 "export beside the checkpoint" -- "$TF" export "$ck" -o "$T/ck/model.onnx" &&
    [[ -s $T/ck/model.onnx ]] && pass "export into the checkpoint folder is written"
finish
