#!/usr/bin/env bash
# soak.sh — long soak of libfastload on a dataset of yours (or a synthetic one): one
# `fastload bench` process over many epochs, printing resident memory at the start and the end
# (and every 10%), failing when it grew by more than 2 MiB + 5% after epoch 2; then rel_soak:
# create/close the loader many times across io backends, checking fds, io_uring rings, threads,
# mappings and RSS.
# Usage: scripts/soak.sh [DATASET] [--epochs E] [--cycles C] [--build DIR] [-- BENCH_OPTIONS...]
#   DATASET  a packed dataset (default: a synthetic 28x28 set of 10,000 records made here)
#   --epochs E   bench epochs (default 500)     --cycles C   loader create/close cycles (default 1000)
#   --build DIR  a non-sanitized build (default build/)
#   BENCH_OPTIONS  passed to fastload bench (e.g. --io pread --augment rrc,flip --size 224)
# Exit: 0 bounded, 1 growth or a leak found, 2 usage, 77 tools not built.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
epochs=500 cycles=1000 build="$root/build" ds="" bopts=()
while (($#)); do
    case "$1" in
        --epochs) epochs=${2:?}; shift ;;
        --cycles) cycles=${2:?}; shift ;;
        --build) build=${2:?}; shift ;;
        --) shift; bopts=("$@"); break ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "soak.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
        *) ds=$1 ;;
    esac
    shift
done
[[ $epochs =~ ^[0-9]+$ && $epochs -ge 3 && $cycles =~ ^[0-9]+$ ]] || { echo "soak.sh: --epochs needs >= 3, --cycles a number" >&2; exit 2; }
FLT="$build/tools/fastload/fastload" SOAK="$build/tests/reliability/rel_soak"
P="$build/tools/packdata/packdata" MKIDX="$build/tests/reliability/rel_make_idx"
for t in "$FLT" "$SOAK"; do [[ -x $t ]] || { echo "soak.sh: $t not built (cmake --build $build)"; exit 77; }; done
W="$(mktemp -d "${TMPDIR:-/tmp}/fl-soak.XXXXXX")"
trap 'rm -rf "$W"' EXIT
if [[ -z $ds ]]; then
    "$MKIDX" "$W/idx" 10000 >/dev/null && "$P" pack "$W/idx" "$W/ds" --compress zstd:3 --shard-size 1M --quiet 2>/dev/null ||
        { echo "soak.sh: cannot make the synthetic dataset"; exit 1; }
    ds="$W/ds"
fi
status=0

echo "=== bench: $epochs epochs over $ds ${bopts[*]}"
t0=$SECONDS
"$FLT" bench "$ds" --epochs "$epochs" --json --quiet "${bopts[@]}" >"$W/bench.json" 2>"$W/bench.err" ||
    { cat "$W/bench.err"; echo "soak.sh: bench failed"; exit 1; }
series=$(sed -nE 's/.*"rss_mib_per_epoch":\[([^]]*)\].*/\1/p' "$W/bench.json")
[[ -n $series ]] || { echo "soak.sh: bench printed no rss_mib_per_epoch"; exit 1; }
tr ',' '\n' <<<"$series" | awk -v n="$epochs" -v secs=$((SECONDS - t0)) '
    { r[NR] = $1 }
    END {
        step = int(n / 10); if (step < 1) step = 1
        for (i = 1; i <= NR; i++) if (i == 1 || i == 2 || i % step == 0 || i == NR) printf "  epoch %6d  RSS %8.2f MiB\n", i, r[i]
        bound = r[2] * 1.05 + 2
        printf "  start %.2f MiB (epoch 2: %.2f), end %.2f MiB, bound %.2f MiB; %d s\n", r[1], r[2], r[NR], bound, secs
        exit !(r[NR] <= bound)
    }' || { echo "FAIL: resident memory grew beyond the bound"; status=1; }

echo "=== rel_soak: $cycles loader create/close cycles over $ds"
if "$SOAK" "$ds" "$cycles" 4096; then echo "  bounded"; else echo "FAIL: rel_soak"; status=1; fi
exit $status
