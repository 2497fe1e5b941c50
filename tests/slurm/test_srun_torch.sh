#!/usr/bin/env bash
# test_srun_torch.sh — the PyTorch path under a real one-node Slurm (tests/slurm/cluster.sh):
# `srun -n 2 scripts/slurm/torch_env.sh /usr/bin/python3 ddp_check.py` maps Slurm's variables to
# RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT, each task joins a gloo process
# group (env://) and trains a linear model under DistributedDataParallel on fastload.torch batches
# for one epoch. Checked: each rank's variables equal SLURM_PROCID/NTASKS/LOCALID, the loader took
# rank/world from torch.distributed, each rank saw half the epoch, no image seen by both, together
# every record of the dataset, and the DDP weights are equal on both ranks.
# About 15-25 s on 2 shared cores (mostly `import torch` in each task); label slurm, FL_LONG_TESTS=1.
. "$(dirname "$0")/lib.sh"
MK="$B/tests/trainer/tf_make_dataset"
LIB="$B/libfastload.so"
for t in "$MK" "$LIB"; do [[ -e $t ]] || { echo "SKIP: $t not built"; exit 77; }; done
/usr/bin/python3 -c "import torch, torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null ||
    { echo "SKIP: /usr/bin/python3 without torch + gloo (python3-torch)"; exit 77; }
# an ASan-instrumented libfastload inside an uninstrumented python needs the runtime first
if [[ ${FL_SANITIZE:-OFF} == ON ]]; then
    asan=$(cc -print-file-name=libasan.so 2>/dev/null)
    [[ -f $asan ]] && export LD_PRELOAD=$asan
fi
"$MK" "$W/train" 600 16 16 1 4 1 >/dev/null || die "fixture"
start_cluster
export FASTLOAD_LIBRARY="$LIB" PYTHONPATH="$SRC_DIR/python${PYTHONPATH:+:$PYTHONPATH}"
timeout 180 srun -n 2 "$SRC_DIR/scripts/slurm/torch_env.sh" /usr/bin/python3 "$SRC_DIR/tests/slurm/ddp_check.py" \
    "$W/train" "$W/ddp.json" >"$W/ddp.out" 2>&1 || { cat "$W/ddp.out"; die "srun -n 2 torch_env.sh python3 ddp_check.py"; }
/usr/bin/python3 - "$W/ddp.json" <<'EOS' || fail "DDP check"
import json, sys
d = json.load(open(sys.argv[1]))
bad = []
for r, e in enumerate(d["env"]):
    want = {"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": "2"}
    got = {k: e[k] for k in want}
    if got != want or e["SLURM_PROCID"] != str(r) or not e["MASTER_ADDR"] or not e["MASTER_PORT"]:
        bad.append(f"rank {r} variables {e}")
if d["loader_rank_world"] != [[0, 2], [1, 2]]:
    bad.append(f"loader rank/world {d['loader_rank_world']}")
n = d["dataset_records"]
if d["dataset_distinct"] != n:
    bad.append(f"fixture images not distinct ({d['dataset_distinct']} of {n})")
if d["per_rank"] != [n // 2, n // 2] or d["overlap"] != 0 or d["union"] != n:
    bad.append(f"shares: per rank {d['per_rank']}, overlap {d['overlap']}, union {d['union']} of {n}")
if not d["weights_equal"]:
    bad.append("DDP weights differ between ranks")
for b in bad:
    print("FAIL:", b)
print(f"per rank {d['per_rank']}, overlap {d['overlap']}, union {d['union']} of {n}, steps {d['steps']}, "
      f"MASTER_ADDR {d['env'][0]['MASTER_ADDR']}:{d['env'][0]['MASTER_PORT']}")
sys.exit(1 if bad else 0)
EOS
pass "torch DDP (gloo) under srun -n 2 via torch_env.sh: disjoint halves of the epoch ($(elapsed) s)"
finish
