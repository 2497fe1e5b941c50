#!/bin/bash
# test_tar_wds.sh — packdata pack --wds: WebDataset shards made with Python's tarfile from real
# photographs. jpg + cls shards (plain, .tar.gz, brace pattern / folder / list file) pack to the
# same fastload digest and classes as the ImageFolder they came from; jpg + cls + txt + npy +
# json shards give those fields (names, types, dtype and shape in the manifest) and the same
# fastload digest as their members extracted and packed with --jsonl --field; the manifest names
# the shard spec as the source and --resume of another spec is refused; a sample missing a field, a second image, a field twice, a bad or differently
# shaped .npy, a bad label, an unsafe path: exit 1 naming shard:key, or skipped and reported.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
D="$B/tools/fastload/fastload"
S="${FL_SOURCE_DIR:?}"
$PY -c 'import PIL, skimage, numpy' 2>/dev/null || { echo "SKIP: needs python3-pil, -skimage, -numpy"; exit 77; }
[[ -x $D ]] || { echo "SKIP: fastload not built"; exit 77; }
W="$T/wds"
mkdir -p "$W"
E="$T/err"
expect_exit() { # WANT WHAT command...: stderr in $E
    local want=$1 what=$2
    shift 2
    "$@" >"$T/out" 2>"$E"
    local got=$?
    if [[ $got -eq $want ]]; then pass "$what: exit $got"; else
        fail "$what: exit $got, want $want"
        sed 's/^/    /' "$E" | head -5
    fi
}
says() { grep -q -- "$1" "$E" && pass "  says '$1'" || fail "message lacks '$1': $(head -3 "$E")"; }

$PY "$S/bench/make_photos.py" "$W/folder" --count 30 --mean-pixels 5000 --quality 85 >/dev/null ||
    { echo "FAIL: make_photos"; exit 1; }
ls "$W/folder" >"$W/classes.txt"
$PY - "$W" <<'EOF'
import io, json, os, sys, tarfile
import numpy as np
w = sys.argv[1]; f = w + "/folder"
classes = sorted(os.listdir(f))
files = [(c, f"{f}/{c}/{n}") for c in classes for n in sorted(os.listdir(f"{f}/{c}"))]
def add(t, name, data):
    ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
def npy(a):
    b = io.BytesIO(); np.save(b, a); return b.getvalue()
def sample(t, i, kind, skip=(), extra=()):
    c, p = files[i]; key = f"s/{i:05d}"
    add(t, key + ".jpg", open(p, "rb").read())
    if "cls" not in skip: add(t, key + ".cls", str(classes.index(c)).encode())
    if kind == "full":
        if "txt" not in skip: add(t, key + ".txt", f"a photo of {c}, number {i}".encode())
        if "npy" not in skip: add(t, key + ".npy", npy(np.arange(6, dtype=np.float32).reshape(2, 3) + i))
        add(t, key + ".json", json.dumps({"i": i}).encode())
    for name, data in extra: add(t, key + name, data)
os.makedirs(w + "/dir", exist_ok=True)
for kind in ("cls", "full"):
    for s in range(3):
        for dst, mode in ((f"{w}/{kind}-{s:06d}.tar", "w"), (f"{w}/{kind}gz-{s:06d}.tar.gz", "w:gz")):
            with tarfile.open(dst, mode) as t:
                for i in range(s * 10, s * 10 + 10): sample(t, i, kind)
for s in range(3):
    os.link(f"{w}/cls-{s:06d}.tar", f"{w}/dir/cls-{s:06d}.tar")
open(w + "/list.txt", "w").write("# shards\n" + "".join(f"cls-{s:06d}.tar\n" for s in range(3)))
bad = {
    "missing": dict(i=3, skip=("txt",)),
    "second_image": dict(i=4, extra=((".png", open(files[0][1], "rb").read()),)),
    "npy_garbage": dict(i=5, skip=("npy",), extra=((".npy", b"\x93NUMPY garbage"),)),
    "npy_shape": dict(i=6, skip=("npy",), extra=((".npy", npy(np.zeros((3, 2), np.float32))),)),
    "bad_label": dict(i=7, skip=("cls",), extra=((".cls", b"seven"),)),
}
for name, b in bad.items():
    with tarfile.open(f"{w}/bad-{name}.tar", "w") as t:
        for i in range(10):
            if i == b["i"]: sample(t, i, "full", skip=b.get("skip", ()), extra=b.get("extra", ()))
            else: sample(t, i, "full")
with tarfile.open(f"{w}/bad-twice.tar", "w") as t:
    for i in range(10):
        sample(t, i, "full")
        if i == 2: add(t, f"s/{i:05d}.txt", b"again")
with tarfile.open(f"{w}/map.tar", "w") as t:  # --field: .score a float, .tags an int list
    for i in range(10):
        sample(t, i, "cls", extra=((".score", f"{i * 0.5}".encode()), (".tags", f"{i} {i + 1}".encode())))
with tarfile.open(f"{w}/bad-unsafe.tar", "w") as t:
    for i in range(10): sample(t, i, "cls")
    add(t, "../evil.jpg", open(files[0][1], "rb").read())
EOF
[[ -f $W/bad-unsafe.tar ]] || { echo "FAIL: making the shards"; exit 1; }
if "$P" pack --wds "$W/cls-000000.tar" "$W/probe" -q 2>&1 | grep -q "without libarchive"; then
    echo "SKIP: packdata built without libarchive"
    exit 77
fi

classes() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]+"/manifest.json"))["classes"])' "$1"; }
"$P" pack "$W/folder" "$W/ref" -q || fail "pack the folder"
ref="$("$D" digest "$W/ref" --size 32 | tail -1)"
for spec in "$W/cls-{000000..000002}.tar" "$W/clsgz-{000000..000002}.tar.gz" "$W/dir" "$W/list.txt"; do
    rm -rf "$W/o"
    "$P" pack --wds "$spec" "$W/o" -q --classes "$W/classes.txt" 2>"$E" || { fail "--wds $spec: $(cat "$E")"; continue; }
    [[ "$("$D" digest "$W/o" --size 32 | tail -1)" == "$ref" && "$(classes "$W/o")" == "$(classes "$W/ref")" ]] &&
        pass "--wds $(basename "$spec"): jpg + cls = the ImageFolder's digest and classes" ||
        fail "--wds $spec differs from the folder"
done
"$P" pack --wds "$W/cls-{000000..000002}.tar" "$W/num" -q && [[ "$(classes "$W/num")" == "['0', '1', '2', '3', '4', '5', '6', '7', '8']" ]] &&
    pass "without --classes: classes 0..max label" || fail "numeric classes: $(classes "$W/num")"
expect_exit 2 "--shuffle on .tar.gz shards" "$P" pack --wds "$W/clsgz-{000000..000002}.tar.gz" "$W/sh" -q --shuffle
expect_exit 2 "--wds with SRC too" "$P" pack --wds "$W/dir" "$W/folder" "$W/x" -q
expect_exit 2 "a bad brace pattern" "$P" pack --wds "$W/cls-{2..1}.tar" "$W/x" -q
# the shard spec is the job's source: named in the manifest, and a killed run resumes only from it
# (the folder holds the same shards: the same inputs, another source)
[[ "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]+"/manifest.json"))["options"]["source"])' "$W/num")" == "$W/cls-{000000..000002}.tar" ]] &&
    pass "options.source is the shard spec" || fail "options.source of --wds: $(grep -o '"source":[^,]*' "$W/num/manifest.json")"
PACKDATA_TEST_KILL_AFTER=5 "$P" pack --wds "$W/cls-{000000..000002}.tar" "$W/k" -q 2>/dev/null
[[ $? -eq 137 && -d $W/k.partial ]] || fail "kill after 5 records: no $W/k.partial"
expect_exit 2 "--resume from another shard spec" "$P" pack --wds "$W/dir" "$W/k" -q --resume
says "another source"
expect_exit 0 "--resume from the same spec" "$P" pack --wds "$W/cls-{000000..000002}.tar" "$W/k" -q --resume
[[ "$("$D" digest "$W/k" --size 32 | tail -1)" == "$("$D" digest "$W/num" --size 32 | tail -1)" ]] &&
    pass "  the resumed pack = the uninterrupted one (digest)" || fail "resumed --wds pack differs"

# every field: jpg cls txt npy json
"$P" pack --wds "$W/full-{000000..000002}.tar" "$W/full" -q 2>"$E"
rc=$?
if [[ $rc -ne 0 ]]; then
    fail "--wds full shards: exit $rc: $(cat "$E")"
else
    $PY - "$W/full" <<'EOF' && pass "full shards: fields jpg image, cls int, txt text, npy ndarray float32 [2,3], json text; 30 records" || fail "full shards' manifest"
import json, sys
m = json.load(open(sys.argv[1] + "/manifest.json"))
f = [(x["name"], x["type"], x.get("dtype"), x.get("shape")) for x in m["fields"]]
assert m["records"] == 30, m["records"]
assert f == [("jpg", "image", None, None), ("cls", "int", None, None), ("txt", "text", None, None),
             ("npy", "ndarray", "float32", [2, 3]), ("json", "text", None, None)], f
EOF
    "$P" verify "$W/full" >/dev/null 2>&1 && pass "  packdata verify passes" || fail "verify of the fields set"
    # the same members extracted to files and packed as JSON Lines with --field: the same stream
    # (fastload digest hashes every field of every batch)
    $PY - "$W" <<'EOF'
import json, os, sys, tarfile
w = sys.argv[1]; x = w + "/extracted"; os.makedirs(x)
rows = {}
for s in range(3):
    with tarfile.open(f"{w}/full-{s:06d}.tar") as t:
        for m in t.getmembers():
            key, ext = m.name.split(".", 1)
            d = t.extractfile(m).read(); r = rows.setdefault(key, {}); stem = f"{x}/{key.replace('/', '_')}"
            if ext in ("jpg", "npy"):
                open(f"{stem}.{ext}", "wb").write(d); r["path" if ext == "jpg" else "npy"] = f"{stem}.{ext}"
            elif ext == "cls": r["label"] = int(d)
            else: r[ext] = d.decode()
with open(x + "/data.jsonl", "w") as f:
    for k in rows: f.write(json.dumps(rows[k]) + "\n")
EOF
    "$P" pack --jsonl "$W/extracted/data.jsonl" "$W/jsonl" -q --field txt:text --field npy:ndarray:float32:2x3 \
        --field json:text 2>"$E" &&
        [[ "$("$D" digest "$W/jsonl" --size 32 | tail -1)" == "$("$D" digest "$W/full" --size 32 | tail -1)" ]] &&
        pass "  the extracted members packed as JSON Lines + --field: the same fastload digest" ||
        fail "full shards vs their extracted members as JSON Lines: $(head -2 "$E")"
    "$P" pack --wds "$W/fullgz-{000000..000002}.tar.gz" "$W/fullgz" -q &&
        $PY -c 'import json,sys; a,b=[json.load(open(p+"/manifest.json")) for p in sys.argv[1:]]; sys.exit(any(a[k]!=b[k] for k in ("fields","records","classes")))' "$W/full" "$W/fullgz" &&
        [[ "$("$D" digest "$W/full" --size 32 | tail -1)" == "$("$D" digest "$W/fullgz" --size 32 | tail -1)" ]] &&
        pass "  .tar.gz shards: the same fields, records, classes and digest" || fail ".tar.gz full shards differ"
fi

# --field EXT:TYPE: a member's text parsed as that type
"$P" pack --wds "$W/map.tar" "$W/map" -q --field score:float --field tags:int_list 2>"$E"
rc=$?
if [[ $rc -ne 0 ]]; then
    fail "--field score:float --field tags:int_list: exit $rc: $(cat "$E")"
else
    $PY -c 'import json,sys; f=[(x["name"],x["type"]) for x in json.load(open(sys.argv[1]+"/manifest.json"))["fields"]]; sys.exit(f!=[("jpg","image"),("cls","int"),("score","float"),("tags","int_list")])' "$W/map" &&
        pass "--field score:float --field tags:int_list: those types" || fail "--field types in the manifest"
fi
expect_exit 1 "--field score:int over 0.0" "$P" pack --wds "$W/map.tar" "$W/x" -q --field score:int
says "map.tar:s/00000"
expect_exit 2 "--field for an extension no member has" "$P" pack --wds "$W/map.tar" "$W/x" -q --field nothere:int
says "no member"

# bad samples: exit 1 naming shard:key (listing stops before anything is written), or skipped
check_bad() { # NAME KEY SUBSTRING
    expect_exit 1 "bad-$1.tar" "$P" pack --wds "$W/bad-$1.tar" "$W/b-$1" -q
    says "bad-$1.tar:$2"
    says "$3"
    [[ ! -e $W/b-$1 && ! -e $W/b-$1.partial ]] || fail "bad-$1 left something at DST"
    "$P" pack --wds "$W/bad-$1.tar" "$W/s-$1" -q --on-error skip --report "$W/rep-$1" 2>/dev/null
    grep -q "bad-$1.tar:$2" "$W/rep-$1" && pass "  --on-error skip: reported" || fail "bad-$1 not reported under skip"
}
check_bad missing s/00003 "no txt member"
check_bad second_image s/00004 "a second image"
check_bad npy_garbage s/00005 "npy"
check_bad npy_shape s/00006 "dimensions"
check_bad bad_label s/00007 "cls:"
check_bad twice s/00002 "twice"
check_bad unsafe ../evil.jpg "unsafe member path"
[[ -d $W/s-unsafe ]] && pass "  unsafe path skipped: the 10 good samples packed" || fail "bad-unsafe skip did not pack"
# damaged shards: a clean exit, never a crash or a sanitizer report
$PY - "$W" <<'EOF'
import random, sys
w = sys.argv[1]
rng = random.Random(9)
b = open(f"{w}/full-000000.tar", "rb").read()
for k in range(8):
    d = bytearray(b)
    for _ in range(rng.randint(1, 30)):
        at = rng.randrange(0, len(d) // 512) * 512 + rng.choice([0, 100, 124, 148, 156, 257, rng.randrange(512)])
        if at < len(d): d[at] = rng.randrange(256)
    if k % 3 == 2: d = d[: rng.randrange(len(d))]
    open(f"{w}/dmg-{k}.tar", "wb").write(bytes(d))
EOF
worst=0
for f in "$W"/dmg-*.tar; do
    for mode in fail skip; do
        "$P" pack --wds "$f" "$W/dmg-out" -q --on-error $mode >/dev/null 2>&1
        rc=$?
        rm -rf "$W/dmg-out"
        ((rc > worst)) && worst=$rc
        ((rc > 2)) && fail "--wds $(basename "$f") --on-error $mode: exit $rc"
    done
done
((worst <= 2)) && pass "8 damaged shards, --on-error fail and skip: exit 0, 1 or 2, no crash"
finish
