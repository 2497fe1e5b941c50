#!/usr/bin/env python3
"""capacity_plan.py — how a data-parallel training job scales, from a handful of figures.

For a model (parameters, forward FLOPs per image) on a given GPU (sustained FLOP/s), interconnect
(bytes/s per GPU inside a node and between nodes) and CPU (images decoded per second per core, as
`fastload bench` measures it), prints for 1..1024 GPUs: the step time, the ring all-reduce time
(2(N-1)/N x gradient bytes / bandwidth, plus a per-hop latency), the part of it hidden behind the
backward pass, the scaling efficiency, and the CPU cores each GPU needs so the loader never starves it.

Usage: scripts/capacity_plan.py [--model resnet50|resnet18|fastcnn] [--params P] [--gflops F]
       [--batch B] [--gpu h200|a100|h100] [--gpu-tflops T] [--mfu U] [--nvlink-gbs X] [--net-gbs Y]
       [--gpus-per-node G] [--decode-per-core D] [--grad-bytes 2|4] [--overlap O] [--json]
Every figure it assumes is printed with the table; docs/SCALING.md explains the model.
"""
import argparse
import json
import sys

MODELS = {  # parameters, forward GFLOPs per image (multiply-add = 2 FLOPs), input side
    "resnet50": (25.56e6, 8.2, 224),   # the usual "4.1 GFLOPs" counts multiply-adds
    "resnet18": (11.69e6, 3.64, 224),
    "fastcnn": (0.05e6, 0.0085, 28),
}
GPUS = {  # dense bf16 tensor-core peak TFLOP/s, NVLink bytes/s per GPU (one direction)
    "h200": (989.0, 450e9),
    "h100": (989.0, 450e9),
    "a100": (312.0, 300e9),
}


def plan(a):
    params, gflops, side = MODELS.get(a.model, (None, None, None))
    params = a.params if a.params else params
    gflops = a.gflops if a.gflops else gflops
    if params is None or gflops is None:
        sys.exit(f"capacity_plan: unknown model '{a.model}': give --params and --gflops")
    peak, nvlink = GPUS[a.gpu]
    peak = a.gpu_tflops if a.gpu_tflops else peak
    nvlink = a.nvlink_gbs * 1e9 if a.nvlink_gbs else nvlink
    net = a.net_gbs * 1e9
    rate = peak * 1e12 * a.mfu                      # sustained FLOP/s
    t_compute = 3 * gflops * 1e9 * a.batch / rate   # forward + backward (2x forward)
    t_backward = t_compute * 2 / 3
    grad_bytes = params * a.grad_bytes
    rows = []
    n = 1
    while n <= 1024:
        if n == 1:
            t_ar = 0.0
        else:
            bw = nvlink if n <= a.gpus_per_node else net
            hops = 2 * (n - 1)
            t_ar = 2 * (n - 1) / n * grad_bytes / bw + hops * a.latency_us * 1e-6
        exposed = max(0.0, t_ar - a.overlap * t_backward)
        step = t_compute + exposed
        imgs_per_gpu = a.batch / step
        rows.append({
            "gpus": n, "step_ms": step * 1e3, "compute_ms": t_compute * 1e3,
            "allreduce_ms": t_ar * 1e3, "exposed_ms": exposed * 1e3,
            "efficiency": t_compute / step, "images_per_sec": imgs_per_gpu * n,
            "cpu_cores_per_gpu": imgs_per_gpu / a.decode_per_core,
        })
        n *= 2
    assumptions = {
        "model": a.model, "params": params, "gflops_per_image": gflops, "batch_per_gpu": a.batch,
        "gpu": a.gpu, "peak_tflops": peak, "mfu": a.mfu, "nvlink_GBps": nvlink / 1e9,
        "network_GBps_per_gpu": net / 1e9, "gpus_per_node": a.gpus_per_node,
        "gradient_bytes": grad_bytes, "overlap_of_backward": a.overlap,
        "latency_us_per_hop": a.latency_us, "decode_images_per_sec_per_core": a.decode_per_core,
    }
    return assumptions, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--params", type=float)
    ap.add_argument("--gflops", type=float, help="forward GFLOPs per image")
    ap.add_argument("--batch", type=int, default=256, help="images per GPU per step")
    ap.add_argument("--gpu", default="h200", choices=sorted(GPUS))
    ap.add_argument("--gpu-tflops", type=float, help="peak bf16 TFLOP/s (default: the GPU's)")
    ap.add_argument("--mfu", type=float, default=0.10,
                    help="fraction of peak sustained (default 0.10: convnets are memory-bound; MLPerf "
                         "ResNet-50 on H100 reaches about 3,500-4,000 images/s per GPU, i.e. 9-10%%)")
    ap.add_argument("--nvlink-gbs", type=float, help="GB/s per GPU inside a node")
    ap.add_argument("--net-gbs", type=float, default=50.0, help="GB/s per GPU between nodes (400 Gb/s IB = 50)")
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--latency-us", type=float, default=5.0, help="per ring hop (default 5 us)")
    ap.add_argument("--decode-per-core", type=float, default=1000.0,
                    help="images/s one core decodes+augments (measure with `fastload bench --workers 1`)")
    ap.add_argument("--grad-bytes", type=int, default=2, choices=(2, 4), help="bytes per gradient value")
    ap.add_argument("--overlap", type=float, default=0.8,
                    help="fraction of the backward pass the all-reduce can hide behind (bucketed, default 0.8)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    assumptions, rows = plan(a)
    if a.json:
        print(json.dumps({"assumptions": assumptions, "rows": rows}))
        return
    print("capacity plan — " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                       for k, v in assumptions.items()))
    print(f"{'GPUs':>5} {'step ms':>9} {'compute':>9} {'allreduce':>10} {'exposed':>9} "
          f"{'efficiency':>10} {'images/s':>12} {'cores/GPU':>10}")
    for r in rows:
        print(f"{r['gpus']:>5} {r['step_ms']:>9.2f} {r['compute_ms']:>9.2f} {r['allreduce_ms']:>10.2f} "
              f"{r['exposed_ms']:>9.2f} {r['efficiency']*100:>9.1f}% {r['images_per_sec']:>12.0f} "
              f"{r['cpu_cores_per_gpu']:>10.1f}")


if __name__ == "__main__":
    main()
