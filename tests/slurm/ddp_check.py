#!/usr/bin/python3
"""ddp_check.py DATASET OUT_JSON — one rank of a PyTorch DDP job started by
`srun -n W scripts/slurm/torch_env.sh /usr/bin/python3 ddp_check.py ...` (tests/slurm/test_srun_torch.sh).

Joins the process group with gloo from the environment torch_env.sh mapped from Slurm's variables,
trains a linear classifier under DistributedDataParallel for one epoch of fastload.torch batches
(rank and world taken from torch.distributed by the loader), and hashes every image it was given.
Rank 0 gathers the hashes and writes OUT_JSON: the variables each rank saw, samples per rank, the
number of images two ranks both saw, the union's size, and the whole epoch's distinct images as one
process (world 1) reads them."""
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist

import fastload.torch as ft


def hashes(loader):
    out = []
    for images, labels in loader:
        for i in range(images.shape[0]):
            out.append(hashlib.sha1(images[i].numpy().tobytes()).hexdigest())
    return out


def main():
    path, out = sys.argv[1], sys.argv[2]
    env = {k: os.environ.get(k) for k in
           ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")}
    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    loader = ft.Loader(path, batch_size=20, order="random", seed=5, workers=1, drop_last=False)
    x0, _ = next(iter(ft.Loader(path, batch_size=1, rank=0, world=1)))
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(x0[0].numel(), 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen, steps = [], 0
    for images, labels in loader:
        for i in range(images.shape[0]):
            seen.append(hashlib.sha1(images[i].numpy().tobytes()).hexdigest())
        x = images.reshape(images.shape[0], -1).float() / 255
        loss = torch.nn.functional.cross_entropy(model(x), labels % 4)
        opt.zero_grad()
        loss.backward()  # DDP all-reduces the gradients over gloo here
        opt.step()
        steps += 1
    # the weights are the same on every rank after DDP steps
    w = torch.cat([p.detach().flatten() for p in model.parameters()])
    ws = [torch.zeros_like(w) for _ in range(world)]
    dist.all_gather(ws, w)
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "env": env, "seen": seen, "steps": steps,
                                      "loader_rank": loader.rank, "loader_world": loader.world})
    if rank == 0:
        whole = hashes(ft.Loader(path, batch_size=50, order="sequential", rank=0, world=1,
                                 drop_last=False))
        sets = [set(g["seen"]) for g in gathered]
        overlap = sum(len(sets[a] & sets[b]) for a in range(world) for b in range(a + 1, world))
        res = {"world": world,
               "per_rank": [len(g["seen"]) for g in gathered],
               "steps": [g["steps"] for g in gathered],
               "loader_rank_world": [[g["loader_rank"], g["loader_world"]] for g in gathered],
               "env": [g["env"] for g in gathered],
               "overlap": overlap,
               "union": len(set().union(*sets)),
               "dataset_distinct": len(set(whole)),
               "dataset_records": len(whole),
               "weights_equal": all(torch.equal(ws[0], v) for v in ws[1:])}
        with open(out, "w") as f:
            json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
