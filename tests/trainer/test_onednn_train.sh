#!/usr/bin/env bash
# test_onednn_train.sh — trainfast --cpu-backend onednn as a user runs it: a short
# run on a synthetic dataset learns (val top-1 >= 0.95) and says it ran on oneDNN; its checkpoints
# are the reference path's: eval of the same checkpoint on both paths agrees (top-1 within one
# image, loss within 1e-3 relative), and a run resumed with --cpu-backend reference from the
# oneDNN run's epoch-2 checkpoint finishes within 2 points of it; a bad $FASTLOAD_CPU_BACKEND is
# refused. In a build without oneDNN: --cpu-backend onednn exits 2 naming libdnnl-dev, then skip.
set -u
B="${FL_BINARY_DIR:?}"
T="$B/trainer/trainfast"
MK="$B/tests/trainer/tf_make_dataset"
W="$(mktemp -d "${TMPDIR:-/tmp}/tf_onednn.XXXXXX")"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset FASTLOAD_CPU_BACKEND
json() { sed "s/.*\"$1\":\([0-9.e+-]*\).*/\1/" <<< "$2"; }

"$MK" "$W/train" 4000 16 16 1 4 1 || fail "fixture"
"$MK" "$W/val" 400 16 16 1 4 2 || fail "fixture"
common=(--data "$W/train" --val "$W/val" --width 8 --batch 50 --epochs 4 --seed 7 --threads 2 --quiet --json)

"$T" train "${common[@]}" --cpu-backend onednn > "$W/x.out" 2> "$W/x.err"
rc=$?
if grep -q "built without oneDNN" "$W/x.err"; then
    [[ $rc -eq 2 ]] || fail "--cpu-backend onednn without oneDNN exited $rc, expected 2"
    grep -q "libdnnl-dev" "$W/x.err" || fail "the refusal does not name libdnnl-dev: $(cat "$W/x.err")"
    echo "ok   --cpu-backend onednn in a build without oneDNN: exit 2, $(cat "$W/x.err")"
    echo "skip: this trainfast was built without oneDNN"
    exit 77
fi
rm -f "$W/x.out" "$W/x.err"

# 1. a oneDNN run learns, and says where it ran
"$T" train "${common[@]}" --cpu-backend onednn --checkpoint "$W/a" > "$W/a.out" 2> "$W/a.err" \
    || { cat "$W/a.err"; fail "oneDNN run"; }
last=$(tail -n 1 "$W/a.out")
grep -q '"backend":"CPU, 2 threads, oneDNN' <<< "$last" || fail "backend is not oneDNN: $last"
top1=$(json val_top1 "$last")
awk -v t="$top1" 'BEGIN { exit !(t >= 0.95) }' || fail "oneDNN val_top1 $top1 < 0.95"
echo "ok   --cpu-backend onednn learns: val_top1 $top1"

# 2. its final checkpoint evaluated on both paths
fa=$(ls "$W/a"/ckpt-*.tfc | sort | tail -n 1)
"$T" eval "$fa" "$W/val" --json > "$W/e1.out" || fail "eval (oneDNN)"
FASTLOAD_CPU_BACKEND=reference "$T" eval "$fa" "$W/val" --json > "$W/e2.out" || fail "eval (reference)"
e1=$(tail -n 1 "$W/e1.out") e2=$(tail -n 1 "$W/e2.out")
t1=$(json top1 "$e1") t2=$(json top1 "$e2") l1=$(json loss "$e1") l2=$(json loss "$e2")
awk -v a="$t1" -v b="$t2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1.0 / 400 + 1e-9) }' \
    || fail "eval top-1 oneDNN $t1 vs reference $t2"
awk -v a="$l1" -v b="$l2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * b + 1e-6) }' \
    || fail "eval loss oneDNN $l1 vs reference $l2"
echo "ok   one checkpoint, both paths: top-1 $t1 / $t2, loss $l1 / $l2"
# the same choice as an option of eval and predict (the option beats the environment), and the
# path that ran named in their JSON
FASTLOAD_CPU_BACKEND=onednn "$T" eval "$fa" "$W/val" --json --cpu-backend reference > "$W/e3.out" \
    || fail "eval --cpu-backend reference"
e3=$(tail -n 1 "$W/e3.out")
grep -q '"backend":"CPU, [0-9]* threads, reference layers' <<< "$e3" || fail "eval --cpu-backend reference ran: $e3"
grep -q '"backend":"CPU, [0-9]* threads, oneDNN' <<< "$e1" || fail "eval (default) ran: $e1"
[[ $(json top1 "$e3") == "$t2" && $(json loss "$e3") == "$l2" ]] \
    || fail "eval --cpu-backend reference: $e3, FASTLOAD_CPU_BACKEND=reference: $e2"
for b in reference onednn; do
    "$T" predict "$fa" "$W/val" --json --cpu-backend "$b" > "$W/p-$b.out" || fail "predict --cpu-backend $b"
done
pr=$(tail -n 1 "$W/p-reference.out") po=$(tail -n 1 "$W/p-onednn.out")
grep -q 'reference layers' <<< "$pr" || fail "predict --cpu-backend reference ran: $pr"
grep -q 'oneDNN' <<< "$po" || fail "predict --cpu-backend onednn ran: $po"
awk -v a="$(json top1 "$pr")" -v b="$(json top1 "$po")" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1.0 / 400 + 1e-9) }' \
    || fail "predict top-1 reference vs oneDNN: $pr / $po"
"$T" eval "$fa" "$W/val" --cpu-backend fast > /dev/null 2> "$W/e4.err"; rc=$?
[[ $rc -eq 2 ]] && grep -q "cpu-backend" "$W/e4.err" || fail "eval --cpu-backend fast: exit $rc, $(cat "$W/e4.err")"
echo "ok   eval/predict --cpu-backend choose the path (JSON backend says which), a bad one exits 2"

# 3. resume the oneDNN run's epoch-2 checkpoint on the reference path
mkdir -p "$W/b"
cp "$(ls "$W/a"/ckpt-*.tfc | sort | sed -n 2p)" "$W/b/"
"$T" train "${common[@]}" --cpu-backend reference --checkpoint "$W/b" --resume > "$W/b.out" 2> "$W/b.err" \
    || { cat "$W/b.err"; fail "resume on the reference path"; }
lb=$(tail -n 1 "$W/b.out")
grep -q '"resumed":true' <<< "$lb" || fail "not resumed: $lb"
grep -q 'reference layers' <<< "$lb" || fail "resumed run not on the reference path: $lb"
tb=$(json val_top1 "$lb")
awk -v a="$top1" -v b="$tb" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.02) }' \
    || fail "resumed on the reference path: val_top1 $tb vs $top1"
echo "ok   oneDNN checkpoint resumed on the reference path: val_top1 $tb (oneDNN throughout: $top1)"

# 4. a bad $FASTLOAD_CPU_BACKEND
FASTLOAD_CPU_BACKEND=fast "$T" train "${common[@]}" > /dev/null 2> "$W/c.err" && fail "FASTLOAD_CPU_BACKEND=fast accepted"
grep -q "FASTLOAD_CPU_BACKEND=fast: expected reference or onednn" "$W/c.err" || fail "bad env: $(cat "$W/c.err")"
echo "ok   FASTLOAD_CPU_BACKEND=fast refused: $(tail -n 1 "$W/c.err")"
exit 0
