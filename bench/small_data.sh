#!/usr/bin/env bash
# small_data.sh — the small-data check: does `trainfast train` with defaults only (--epochs
# auto) train a small dataset enough? On 6,000 real Fashion-MNIST training images (every 10th image
# of each class) it compares the default run with 20 epochs of the same recipe (target: within 1
# point of test top-1) and with the old default of 2 epochs, then trains the full 60,000 images
# with defaults (target: >= 91%). Test top-1 on Fashion-MNIST's 10,000 test images (flip TTA).
# Not a CTest test: it takes minutes (about 3 on 2 quiet cores, estimated from a 52 s 20-epoch
# run; 16 minutes measured on this 2-core machine at load 8-15).
#
# Usage: bench/small_data.sh [--build DIR] [--seed S] [--quick]
#   --quick   the 6,000-image runs only (no full-set run)
# Output: the table on stdout, bench/out/small_data/summary.json, each run's JSON and stderr in
# bench/out/small_data/. Exit 0 when both targets are met, 1 when one is missed or a run fails.
#
# The subset: samples/fashion-mnist's training IDX file interleaves the classes (image i of class c
# at position 10*i + c), so every 10th record would be one class; this takes record 10*k + k%10
# for k < 6,000: images 0, 10, 20, ... of class 0, 1, 11, 21, ... of class 1, and so on, 600 per
# class, written as IDX and packed by packdata like the full set (raw, zstd:19).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
me=small_data.sh
build="$root/build" seed=0 quick=0
. "$here/lib_bench.sh"
bench_options "build seed quick:1" "$@"
build=$(realpath -m "$build")
PY=/usr/bin/python3
TF="$build/trainer/trainfast" PD="$build/tools/packdata/packdata"
bench_need_built "$TF" "$PD"
fm="$root/samples/fashion-mnist" out="$root/bench/out/small_data"
mkdir -p "$out"
bench_fashion_mnist "$PD"
if [[ ! -f "$out/train6k/manifest.json" ]]; then
    "$PY" - "$fm/data" "$out" <<'EOF'
import collections, gzip, sys
src, dst = sys.argv[1], sys.argv[2]
img = gzip.open(f"{src}/train-images-idx3-ubyte.gz").read()
lab = gzip.open(f"{src}/train-labels-idx1-ubyte.gz").read()
n, h, w = (int.from_bytes(img[o:o + 4], "big") for o in (4, 8, 12))
keep = [10 * k + k % 10 for k in range(n // 10)]
counts = collections.Counter(lab[8 + i] for i in keep)
assert len(counts) == 10 and set(counts.values()) == {n // 100}, counts
sz = h * w
with gzip.open(f"{dst}/every10-images-idx3-ubyte.gz", "wb", compresslevel=1) as f:
    f.write(img[:4] + len(keep).to_bytes(4, "big") + img[8:16]
            + b"".join(img[16 + i * sz:16 + (i + 1) * sz] for i in keep))
with gzip.open(f"{dst}/every10-labels-idx1-ubyte.gz", "wb", compresslevel=1) as f:
    f.write(lab[:4] + len(keep).to_bytes(4, "big") + bytes(lab[8 + i] for i in keep))
EOF
    "$PD" pack --idx "$out/every10-images-idx3-ubyte.gz" "$out/every10-labels-idx1-ubyte.gz" \
        "$out/train6k" --class-names "$fm/data/classes.txt" --compress zstd:19 --quiet
fi

# run NAME DATA [trainfast options]: one training run, its JSON summary in $out/NAME.json
run() {
    local name=$1 data=$2
    shift 2
    local t0=$SECONDS
    if ! "$TF" train --data "$data" --val "$fm/packed/test" --seed "$seed" --json "$@" \
            > "$out/$name.out" 2> "$out/$name.err"; then
        echo "small_data.sh: run $name failed:" >&2
        tail -3 "$out/$name.err" >&2
        exit 1
    fi
    tail -n 1 "$out/$name.out" > "$out/$name.json"
    echo "  $name: $(grep -o '"val_top1":[0-9.]*' "$out/$name.json"), $(grep -o '"epochs":[0-9]*' \
        "$out/$name.json"), $((SECONDS - t0)) s; $(grep -m1 'epochs auto' "$out/$name.err" || true)" >&2
}
echo "small_data.sh: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), seed $seed" >&2
run small_default "$out/train6k"
run small_e20 "$out/train6k" --epochs 20
run small_e2 "$out/train6k" --epochs 2
((quick)) || run full_default "$fm/packed/train"

"$PY" - "$out" "$quick" <<'EOF'
import json, sys
out, quick = sys.argv[1], sys.argv[2] == "1"
names = ["small_default", "small_e20", "small_e2"] + ([] if quick else ["full_default"])
r = {n: json.load(open(f"{out}/{n}.json")) for n in names}
top = {n: 100 * r[n]["val_top1"] for n in names}
gap = top["small_e20"] - top["small_default"]
ok_small = gap <= 1.0
print(f"{'run':<42} {'epochs':>6} {'top-1':>7} {'wall s':>7}")
rows = [("6,000 images, defaults (--epochs auto)", "small_default"),
        ("6,000 images, --epochs 20", "small_e20"),
        ("6,000 images, --epochs 2 (the old default)", "small_e2")]
if not quick:
    rows.append(("60,000 images (full), defaults", "full_default"))
for label, n in rows:
    print(f"{label:<42} {r[n]['epochs']:>6} {top[n]:>6.2f}% {r[n]['wall_seconds']:>7.1f}")
print(f"gap (20 epochs - defaults) on 6,000: {gap:+.2f} points (target <= 1.00): "
      f"{'PASS' if ok_small else 'MISS'}")
summary = {"top1": top, "epochs": {n: r[n]["epochs"] for n in names}, "gap_points": gap,
           "small_pass": ok_small, "wall_seconds": {n: r[n]["wall_seconds"] for n in names}}
ok = ok_small
if not quick:
    ok_full = top["full_default"] >= 91.0
    print(f"full Fashion-MNIST with defaults: {top['full_default']:.2f}% (target >= 91.00): "
          f"{'PASS' if ok_full else 'MISS'}")
    summary["full_pass"] = ok_full
    ok = ok and ok_full
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
sys.exit(0 if ok else 1)
EOF
