#!/usr/bin/python3
"""onnx_check.py — checks of an exported model, for tests/trainer/test_export_onnx.sh,
bench/onnx_fmnist.sh and tests/gpu/check.sh.

  onnx_check.py check MODEL.onnx C H W CLASSES [BATCH]
      onnx.checker.check_model (full_check: shape inference too); input `images` float32
      [N|BATCH, C, H, W], output `logits` float32 [N|BATCH, CLASSES]; no BatchNormalization node;
      metadata_props has classes (CLASSES names), input, model, weights. Prints one JSON line.
  onnx_check.py compare ORT.npy REF.npy [LABELS.npy] [--rtol 1e-4] [--min-agree 0.999]
      per row: max |ort - ref| <= rtol * max |ref| of that row (logits near 0 make an element-wise
      relative error meaningless; the row's scale is what a softmax sees); argmax agreement
      >= min-agree; with labels, top-1 of both. Prints one JSON line; exit 1 when a bound fails.
  onnx_check.py run MODEL.onnx PIXELS.npy LOGITS.npy [BATCH]
      the same as onnx_run.js with the Python onnxruntime (the GPU machine's), CPU provider.
Exit: 0 ok, 1 a check failed, 2 usage, 77 a module is missing (skip)."""
import json
import sys


def need(mod):
    try:
        return __import__(mod)
    except ImportError as e:
        print(f"onnx_check.py: skip: python module {mod} missing ({e})")
        sys.exit(77)


def fail(msg):
    print(f"onnx_check.py: FAIL: {msg}")
    sys.exit(1)


def check(path, c, h, w, classes, batch=None):
    onnx = need("onnx")
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)

    def dims(vi):
        return [d.dim_value if d.HasField("dim_value") else d.dim_param
                for d in vi.type.tensor_type.shape.dim]
    g = model.graph
    want_n = int(batch) if batch else "N"
    if [i.name for i in g.input] != ["images"] or [o.name for o in g.output] != ["logits"]:
        fail(f"inputs {[i.name for i in g.input]} outputs {[o.name for o in g.output]}")
    if g.input[0].type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
        fail("images is not float32")
    if dims(g.input[0]) != [want_n, int(c), int(h), int(w)]:
        fail(f"images dims {dims(g.input[0])}")
    if dims(g.output[0]) != [want_n, int(classes)]:
        fail(f"logits dims {dims(g.output[0])}")
    ops = [n.op_type for n in g.node]
    if "BatchNormalization" in ops:
        fail("a BatchNormalization node is left")
    meta = {p.key: p.value for p in model.metadata_props}
    for k in ("classes", "input", "model", "weights"):
        if k not in meta:
            fail(f"metadata_props lacks {k}: {sorted(meta)}")
    names = json.loads(meta["classes"])
    contract = json.loads(meta["input"])
    if len(names) != int(classes) or contract.get("name") != "images" or contract.get("range") != [0, 255]:
        fail(f"metadata: classes {names}, input {contract}")
    print(json.dumps({"checker": "ok", "onnx": onnx.__version__, "ir_version": model.ir_version,
                      "opset": model.opset_import[0].version, "producer": model.producer_name,
                      "producer_version": model.producer_version, "nodes": len(ops),
                      "ops": sorted(set(ops)), "classes": names, "weights": meta["weights"],
                      "batch_norm_folded": meta.get("batch_norm_folded")}))


def compare(args):
    np = need("numpy")
    rtol, agree_min, rest = 1e-4, 0.999, []
    i = 0
    while i < len(args):
        if args[i] in ("--rtol", "--min-agree"):
            v = float(args[i + 1])
            rtol, agree_min = (v, agree_min) if args[i] == "--rtol" else (rtol, v)
            i += 2
        else:
            rest.append(args[i])
            i += 1
    a, b = np.load(rest[0]).astype(np.float64), np.load(rest[1]).astype(np.float64)
    if a.shape != b.shape:
        fail(f"shapes {a.shape} vs {b.shape}")
    scale = np.maximum(np.abs(b).max(axis=1), 1e-30)
    rel = np.abs(a - b).max(axis=1) / scale
    agree = float((a.argmax(1) == b.argmax(1)).mean())
    out = {"rows": int(a.shape[0]), "max_rel": float(rel.max()), "median_rel": float(np.median(rel)),
           "max_abs": float(np.abs(a - b).max()), "argmax_agree": agree, "rtol": rtol}
    if len(rest) > 2:
        y = np.load(rest[2])
        out["top1_ort"] = float((a.argmax(1) == y).mean())
        out["top1_ref"] = float((b.argmax(1) == y).mean())
    print(json.dumps(out))
    if rel.max() > rtol:
        fail(f"row {int(rel.argmax())}: max |diff| / max |ref| = {rel.max():.3g} > {rtol}")
    if agree < agree_min:
        fail(f"argmax agrees on {agree:.5f} of rows < {agree_min}")


def run(path, pixels, out, batch=256):
    np = need("numpy")
    ort = need("onnxruntime")
    import time
    x = np.load(pixels)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    res, t0 = [], time.perf_counter()
    for s in range(0, x.shape[0], int(batch)):
        xb = np.ascontiguousarray(x[s:s + int(batch)].transpose(0, 3, 1, 2), dtype=np.float32)
        res.append(sess.run(["logits"], {"images": xb})[0])
    secs = time.perf_counter() - t0
    np.save(out, np.concatenate(res).astype(np.float32))
    print(json.dumps({"images": int(x.shape[0]), "seconds": secs, "images_per_sec": x.shape[0] / secs,
                      "onnxruntime": ort.__version__}))


def main(argv):
    if len(argv) >= 7 and argv[1] == "check" and len(argv) <= 8:
        check(*argv[2:])
    elif len(argv) >= 4 and argv[1] == "compare":
        compare(argv[2:])
    elif len(argv) in (5, 6) and argv[1] == "run":
        run(*argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
