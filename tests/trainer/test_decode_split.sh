#!/usr/bin/env bash
# test_decode_split.sh — trainfast train on the CPU from a JPEG data set (RRC + flip): without
# --workers it starts one decode worker per core and keeps as many at work as its steps need,
# and --json says so (decode_workers within [1, cores], decode_workers_started = cores,
# decode_workers_auto true, compute_threads, the CPU split with decode + compute <= the cores'
# time); an explicit --workers N is kept (auto false, N started and at work); and the final
# weights are bit-identical whatever the decode workers (auto, 1, 3). Needs /usr/bin/python3
# with PIL (skip 77 without).
set -u
B="${FL_BINARY_DIR:?}"
TF="$B/trainer/trainfast" PD="$B/tools/packdata/packdata" CMP="$B/tests/trainer/tf_ckpt_compare"
PY=/usr/bin/python3
for t in "$TF" "$PD" "$CMP"; do [[ -x "$t" ]] || { echo "SKIP: $t not built"; exit 77; }; done
$PY -c "import PIL" 2>/dev/null || { echo "SKIP: $PY has no PIL"; exit 77; }
W="$(mktemp -d "${TMPDIR:-/tmp}/decode-split.XXXXXX")"
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 96 JPEGs of 2 classes (a bright band at the top or the bottom), 40..79 px
$PY - "$W/img" <<'PY' || fail "cannot write the images"
import os, random, sys
from PIL import Image
random.seed(1)
for k in range(96):
    c = k % 2
    w, h = 40 + random.randrange(40), 40 + random.randrange(40)
    im = Image.new("RGB", (w, h), (20, 30, 40))
    band = Image.new("RGB", (w, h // 3), (230, 220, 200))
    im.paste(band, (0, 0 if c == 0 else h - h // 3))
    d = os.path.join(sys.argv[1], f"class{c}")
    os.makedirs(d, exist_ok=True)
    im.save(os.path.join(d, f"{k:03d}.jpg"), quality=90)
PY
"$PD" pack "$W/img" "$W/jpg" --encode keep --quiet || fail "packdata keep"
"$PD" pack "$W/img" "$W/val" --encode raw --resize 32x32 --compress none --part 0/4 --quiet ||
    fail "packdata val"

cores=$(nproc)
run() { # NAME [options]: trains 2 epochs, keeps its JSON and its final checkpoint
    local name=$1
    shift
    "$TF" train --data "$W/jpg" --val "$W/val" --model fastcnn --width 8 --size 32 --batch 16 \
        --epochs 2 --threads 2 --device cpu --seed 7 --checkpoint "$W/$name" --json --quiet "$@" \
        >"$W/$name.json" 2>"$W/$name.err" || { cat "$W/$name.err"; fail "train $name"; }
}
field() { $PY -c "import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])[sys.argv[2]])" "$W/$1.json" "$2"; }
check() { # what want got
    [[ "$3" == "$2" ]] || fail "$1: got '$3', want '$2'"
    echo "ok   $1: $3"
}

run auto
run w1 --workers 1
run w3 --workers 3
check "auto: decode_workers_auto" True "$(field auto decode_workers_auto)"
check "auto: decode_workers_started (the cores)" "$cores" "$(field auto decode_workers_started)"
check "auto: cores" "$cores" "$(field auto cores)"
check "auto: compute_threads" 2 "$(field auto compute_threads)"
n=$(field auto decode_workers)
((n >= 1 && n <= cores)) || fail "auto: decode_workers $n outside [1, $cores]"
echo "ok   auto: decode_workers $n in [1, $cores]"
lo=$(field auto decode_workers_min) hi=$(field auto decode_workers_max)
((1 <= lo && lo <= hi && hi <= cores)) || fail "auto: min/max $lo/$hi"
$PY - "$W/auto.json" <<'PY' || fail "auto: the CPU split does not add up"
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
for k in ("decode_busy_seconds", "cpu_seconds", "decode_cpu_seconds", "compute_cpu_seconds",
          "train_wall_seconds", "decode_core_fraction", "compute_core_fraction", "decode_workers_mean"):
    assert isinstance(d[k], (int, float)) and d[k] >= 0, (k, d[k])
assert d["train_wall_seconds"] > 0 and d["cpu_seconds"] > 0
assert abs(d["decode_cpu_seconds"] + d["compute_cpu_seconds"] - d["cpu_seconds"]) < 1e-6
assert d["decode_core_fraction"] + d["compute_core_fraction"] <= 1.05  # tick rounding
assert 1 <= d["decode_workers_mean"] <= d["decode_workers_started"]
PY
echo "ok   auto: CPU split (decode + compute = the process's CPU, within the cores' time)"
for w in 1 3; do
    check "--workers $w: decode_workers_auto" False "$(field w$w decode_workers_auto)"
    check "--workers $w: started" "$w" "$(field w$w decode_workers_started)"
    check "--workers $w: at work" "$w" "$(field w$w decode_workers)"
done
# the summary's text line (not --quiet)
"$TF" train --data "$W/jpg" --val "$W/val" --model fastcnn --width 8 --size 32 --batch 16 --epochs 1 \
    --threads 2 --device cpu >/dev/null 2>"$W/text.err" || fail "train (text)"
grep -q "^trainfast: cores: $cores for this process: decode [0-9]* of $cores workers at work at the end (chosen as it trained" \
    "$W/text.err" || { cat "$W/text.err"; fail "no core split line in the summary"; }
echo "ok   summary line: $(grep '^trainfast: cores:' "$W/text.err" | cut -c1-100)..."
# the same weights whatever the decode workers
fa=$(ls "$W/auto"/*.tfc | sort | tail -n 1)
for w in 1 3; do
    fb=$(ls "$W/w$w"/*.tfc | sort | tail -n 1)
    [[ $(basename "$fa") == $(basename "$fb") ]] || fail "final checkpoints differ in step: $fa $fb"
    "$CMP" "$fa" "$fb" || fail "weights with --workers $w differ from the automatic choice"
    echo "ok   weights bit-identical: auto and --workers $w"
done
echo PASS
