#!/usr/bin/env bash
# run.sh — the main job on a real dataset: fetch Fashion-MNIST, pack it with packdata (raw pixels +
# zstd with a trained dictionary), and train the small CNN with trainfast (GPU when there is one,
# otherwise the CPU backend). Extra arguments go to `trainfast train` (e.g. --epochs 3, --json).
# The run's log and its HTML report (docs/REPORT.md) go to samples/fashion-mnist/output/.
# Usage: samples/fashion-mnist/run.sh [trainfast options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${FL_BUILD:-$root/build}"
case "${1:-}" in
    -h|--help)
        sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
        echo "Environment: FL_BUILD=DIR uses another build directory (default: $root/build)."
        echo "trainfast options: $build/trainer/trainfast train --help"
        exit 0 ;;
esac
packdata="$build/tools/packdata/packdata"
trainfast="$build/trainer/trainfast"
for t in "$packdata" "$trainfast"; do
    [[ -x "$t" ]] || { echo "run.sh: $t not built: run scripts/setup.sh first" >&2; exit 1; }
done

"$here/fetch.sh"
packed="$here/packed"
mkdir -p "$packed"
for split in train:train test:t10k; do
    name=${split%%:*} prefix=${split##*:}
    if [[ -f "$packed/$name/manifest.json" ]]; then
        echo "fashion-mnist: $packed/$name already packed"
    else
        "$packdata" pack --idx "$here/data/$prefix-images-idx3-ubyte.gz" "$here/data/$prefix-labels-idx1-ubyte.gz" \
            "$packed/$name" --class-names "$here/data/classes.txt" --compress zstd:19 --resume
    fi
done
"$packdata" info "$packed/train"
"$packdata" info "$packed/test"
out="$here/output"
mkdir -p "$out"
# each run of the sample is a new run (trainfast refuses a new run into a folder holding an
# earlier run's checkpoints): the previous sample run's output is replaced, unless --resume
# continues it
resume=0
for a in "$@"; do [[ $a == --resume* ]] && resume=1; done
((resume)) || rm -rf "$out/checkpoint" "$out/train.jsonl" "$out/report.html"
echo "fashion-mnist: training; log $out/train.jsonl, report $out/report.html, checkpoint in $out/checkpoint/"
# the checkpoint is what `trainfast eval`, `predict` and `export` run on next (README)
exec "$trainfast" train --data "$packed/train" --val "$packed/test" --model fastcnn \
    --log "$out/train.jsonl" --report "$out/report.html" --checkpoint "$out/checkpoint" "$@"
