"""tensor_only.py MODE ... — the rows of test_tensor_only.sh (records without an image, packed
with `packdata pack --no-image`) and the exact check of what the loader delivers for them.
Run with /usr/bin/python3 (numpy).

  gen DIR
      DIR/meta.jsonl and DIR/meta.csv: the same ROWS rows (label, emb float_vector:8, arr
      ndarray:float32:2x3 from a .npy file or a nested list, m ndarray:int16:4, ids int_list of
      0-5 values, cap text with commas, quotes and non-ASCII, score float), some with a "path"
      key (not read under --no-image); row BAD_LEN has an emb of 3 values and row BAD_MISSING
      lacks "cap" (in the CSV: a short row)
  check KIND DIR DUMP
      DUMP (pd_fields_dump's output for a pack of DIR/meta.KIND, or of its parts in order) holds
      exactly the good rows in order, named meta.KIND:LINE, every value equal to the row's
  extract DIR EXDIR PREFIX ROW
      what `packdata extract` wrote for row ROW (PREFIX.json, PREFIX.arr.npy, PREFIX.m.npy,
      PREFIX.cap.txt) equals the row, and no image file was written
Prints one line per mismatch; exits 1 when there is any."""
import csv
import json
import os
import sys

import numpy as np

ROWS, BAD_LEN, BAD_MISSING = 24, 5, 9
FIELDS = ["emb:float_vector:8", "arr:ndarray:float32:2x3", "m:ndarray:int16:4", "ids:int_list",
          "cap:text", "score:float"]
bad = []


def check(cond, what):
    if not cond:
        bad.append(what)


def f32(v):
    """The float32 nearest v, as the shortest text that reads back as exactly it."""
    return float(np.float32(v))


def rows():
    """The rows as Python values (None for the bad rows' defects)."""
    rng = np.random.default_rng(7)
    out = []
    special = [0.0, -0.0, 1e-30, -3.4e38, 3.4e38, 1.5, -2.25, 1 / 3]
    for r in range(ROWS):
        emb = [f32(v) for v in rng.standard_normal(8) * 10.0 ** rng.integers(-3, 4)]
        if r == 0:
            emb = [f32(v) for v in special]
        arr = (rng.standard_normal((2, 3)) * 100).astype(np.float32)
        m = rng.integers(-32768, 32768, 4).astype(np.int16)
        ids = [int(v) for v in rng.integers(-5, 1000, int(rng.integers(0, 6)))]
        cap = ["", "plain", "héllo, \"wörld\"", "日本語 テキスト", "a,b;c\td"][r % 5] + (f" #{r}" if r % 5 else "")
        row = {"label": r % 4, "emb": emb, "arr": arr, "m": m, "ids": ids, "cap": cap,
               "score": f32(r / 7 - 1)}
        if r == BAD_LEN:
            row["emb"] = emb[:3]
        if r == BAD_MISSING:
            row["cap"] = None
        out.append(row)
    return out


def gen(d):
    os.makedirs(d, exist_ok=True)
    rs = rows()
    with open(f"{d}/meta.jsonl", "w", encoding="utf-8") as f:
        for r, row in enumerate(rs):
            np.save(f"{d}/a{r}.npy", row["arr"])
            o = {"label": row["label"], "emb": row["emb"],
                 # even rows: the .npy file; odd rows: a nested list (the same values)
                 "arr": f"a{r}.npy" if r % 2 == 0 else [[f32(v) for v in x] for x in row["arr"]],
                 "m": [int(v) for v in row["m"]], "ids": row["ids"], "score": row["score"]}
            if row["cap"] is not None:
                o["cap"] = row["cap"]
            if r % 3 == 1:
                o["path"] = f"img{r}.jpg"  # not read under --no-image (no such file either)
            f.write(json.dumps(o, ensure_ascii=False) + "\n")
    with open(f"{d}/meta.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "emb", "arr", "m", "ids", "cap", "score"])
        for r, row in enumerate(rs):
            cells = [row["label"], " ".join(repr(v) for v in row["emb"]), f"a{r}.npy",
                     json.dumps([int(v) for v in row["m"]]), " ".join(str(v) for v in row["ids"]),
                     row["cap"], repr(row["score"])]
            if row["cap"] is None:
                cells = cells[:5] + cells[6:]  # a short row
            w.writerow(cells)


def good_rows():
    return [(r, row) for r, row in enumerate(rows()) if r not in (BAD_LEN, BAD_MISSING)]


def same_row(what, row, got):
    """got: {field: value} as pd_fields_dump or extract's .json wrote them (arrays apart)."""
    check(got.get("label") == row["label"], f"{what}: label {got.get('label')} != {row['label']}")
    e = np.array(got.get("emb", []), dtype=np.float64).astype(np.float32)
    check(np.array_equal(e, np.array(row["emb"], dtype=np.float32)),
          f"{what}: emb {got.get('emb')} != {row['emb']}")
    check(got.get("ids") == row["ids"], f"{what}: ids {got.get('ids')} != {row['ids']}")
    check(np.float32(got.get("score", np.nan)) == np.float32(row["score"]),
          f"{what}: score {got.get('score')} != {row['score']}")


def check_dump(kind, d, dump):
    got = [json.loads(line) for line in open(dump)]
    want = good_rows()
    check(len(got) == len(want), f"{len(got)} records delivered, want {len(want)}")
    for i, (g, (r, row)) in enumerate(zip(got, want)):
        line = r + (2 if kind == "csv" else 1)
        what = f"record {i} (row {r})"
        check(g["index"] == i, f"{what}: index {g['index']}")
        check(g["name"] == f"meta.{kind}:{line}", f"{what}: name {g['name']!r}, want meta.{kind}:{line}")
        f = g["fields"]
        check(list(f) == ["label", "emb", "arr", "m", "ids", "cap", "score"],
              f"{what}: fields {list(f)} (an image field? another order?)")
        same_row(what, row, f)
        a = np.array(f.get("arr", []), dtype=np.float64).astype(np.float32)
        check(np.array_equal(a, row["arr"].reshape(-1)), f"{what}: arr {a} != {row['arr']}")
        check(f.get("m") == [int(v) for v in row["m"]], f"{what}: m {f.get('m')} != {row['m']}")
        check(bytes.fromhex(f.get("cap", "")) == row["cap"].encode(),
              f"{what}: cap {f.get('cap')!r} != {row['cap']!r}")


def check_extract(d, exdir, prefix, r):
    row = rows()[r]
    j = json.load(open(f"{exdir}/{prefix}.json", encoding="utf-8"))
    same_row(f"extract row {r}", row, j)
    check(j.get("arr") == f"{prefix}.arr.npy" and j.get("cap") == f"{prefix}.cap.txt",
          f"extract row {r}: arr/cap named {j.get('arr')!r} {j.get('cap')!r}")
    arr = np.load(f"{exdir}/{prefix}.arr.npy")
    check(arr.dtype == np.float32 and np.array_equal(arr, row["arr"]), f"extract row {r}: arr {arr}")
    m = np.load(f"{exdir}/{prefix}.m.npy")
    check(m.dtype == np.int16 and np.array_equal(m, row["m"]), f"extract row {r}: m {m}")
    cap = open(f"{exdir}/{prefix}.cap.txt", "rb").read()
    check(cap == row["cap"].encode(), f"extract row {r}: cap {cap!r}")
    files = sorted(os.listdir(exdir))
    check(files == sorted(f"{prefix}{s}" for s in (".json", ".arr.npy", ".m.npy", ".cap.txt")),
          f"extract row {r}: files {files} (an image file?)")


def main():
    mode = sys.argv[1]
    if mode == "gen":
        gen(sys.argv[2])
    elif mode == "check":
        check_dump(sys.argv[2], sys.argv[3], sys.argv[4])
    elif mode == "extract":
        check_extract(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    for b in bad[:20]:
        print(f"mismatch: {b}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
