#!/usr/bin/env bash
# test_parts_tar.sh — `--part I/N` over an ImageFolder held in a tar, where a task keeps only its
# own slice (ImageNet's tar of per-class tars: a counting pass, then only the inner tars holding
# the slice are listed again; a tar of class folders: the slice is kept as the list is made): the
# parts of every N (1, 2, 3, 4, all inputs; --shuffle) hold exactly the records of one
# uninterrupted pack, in order, for a tar of tars listed out of class order (one class split over
# two inner tars, a sub-folder inside an inner tar), a tar of class folders under a top folder
# listed out of order, and its .tar.gz (read in order). A duplicate member: refused by every part
# (as by the one-process pack); under --on-error skip the later copy is kept by parts and whole
# alike. `--resume` of a complete part is a no-op.
. "$(dirname "$0")/lib.sh"
die() { echo "FAIL: $*"; exit 1; }
PY=/usr/bin/python3
$PY -c 'import tarfile' 2>/dev/null || { echo "SKIP: needs /usr/bin/python3"; exit 77; }
jpgs=("$FX"/jpg/*/*.jpg)
((${#jpgs[@]} >= 4)) || die "fixture JPEGs"
# the tars (Python's tarfile): members in a fixed scrambled order
$PY - "$T" "${jpgs[@]}" <<'EOF'
import gzip, io, sys, tarfile
t, jpgs = sys.argv[1], sys.argv[2:]
data = [open(p, "rb").read() for p in jpgs]
def add(tf, name, b):
    ti = tarfile.TarInfo(name); ti.size = len(b); ti.mtime = 1700000000
    tf.addfile(ti, io.BytesIO(b))
def tar_bytes(members):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for n, b in members:
            add(tf, n, b)
    return bio.getvalue()
# class -> member names (7, 5, 6 and 4 images; "2bird" split over 2bird.tar and 2bird.TAR)
k = 0
def img():
    global k
    k += 1
    return data[k % len(data)] + bytes([k])  # distinct bytes per member
inner = {
    "1dog.tar": [("d_%d.JPEG" % i, img()) for i in (4, 0, 6, 2, 1, 5, 3)],
    "0cat.tar": [("c_%d.JPEG" % i, img()) for i in (2, 0, 1)] + [("sub/c_9.JPEG", img()), ("c_10.JPEG", img())],
    "2bird.tar": [("b_%d.JPEG" % i, img()) for i in (5, 1, 3)],
    "2bird.TAR": [("b_%d.JPEG" % i, img()) for i in (0, 2, 4)],
    "3fish.tar": [("f_%d.JPEG" % i, img()) for i in (1, 3, 0, 2)],
}
order = ["1dog.tar", "3fish.tar", "0cat.tar", "2bird.TAR", "2bird.tar"]
open(t + "/nested.tar", "wb").write(tar_bytes([(n, tar_bytes(inner[n])) for n in order]))
# the same classes as class folders under a top folder, scrambled
flat = []
for n in order:
    c = n[:-4]
    flat += [("train/%s/%s" % (c, m), b) for m, b in inner[n]]
flat = flat[1::2] + flat[0::2]
fb = tar_bytes(flat)
open(t + "/flat.tar", "wb").write(fb)
open(t + "/flat.tar.gz", "wb").write(gzip.compress(fb, mtime=0))
# a duplicate member in class 3fish (the later copy differs)
d = dict(inner)
d["3fish.tar"] = inner["3fish.tar"] + [("f_1.JPEG", img())]
open(t + "/dup.tar", "wb").write(tar_bytes([(n, tar_bytes(d[n])) for n in order]))
EOF
[[ -f $T/dup.tar ]] || die "making the tars"
if "$P" pack "$T/flat.tar" "$T/probe" --quiet 2>&1 | grep -q "without libarchive"; then
    echo "SKIP: packdata built without libarchive"
    exit 77
fi
n=22
recs() { "$P" info "$1" --json 2>/dev/null | grep -o '"records":[0-9]*' | head -1 | cut -d: -f2; }
# same_records A B: the same records in the same order (names, labels and stored bytes of each)
dump() {
    local d=$1 i m
    m=$(recs "$d")
    for ((i = 0; i < ${m:-0}; i++)); do
        "$P" extract "$d" "$i" -o "$T/x.bin" 2>"$T/x.err" || echo "extract $i failed"
        cat "$T/x.err" # label and name
        md5sum <"$T/x.bin"
    done
}
FLT="$B/tools/fastload/fastload"
# same_records A B [quick]: quick (with fastload built): the record count and the loader's digest
# of every record in order (pixels and labels; some members share pixels), else also every
# record's name, label and stored bytes
same_records() {
    [[ $(recs "$1") == $(recs "$2") ]] || return 1
    if [[ -x $FLT ]]; then
        local a b
        a=$("$FLT" digest "$1" --order seq --batch 1 --size 16 --workers 1 2>&1 | tail -1)
        b=$("$FLT" digest "$2" --order seq --batch 1 --size 16 --workers 1 2>&1 | tail -1)
        [[ -n $a && $a == "$b" ]] || return 1
        [[ ${3:-} == quick ]] && return 0
    fi
    [[ "$(dump "$1")" == "$(dump "$2")" ]]
}

for src in nested.tar flat.tar flat.tar.gz; do
    "$P" pack "$T/$src" "$T/w-$src" --shard-size 4K --quiet || die "whole pack of $src"
    [[ $(recs "$T/w-$src") == "$n" ]] || fail "$src: $(recs "$T/w-$src") records, want $n"
    Ns="1 2 3 4"
    [[ $src == nested.tar ]] && Ns="1 2 3 4 $n"
    for N in $Ns; do
        mkdir -p "$T/j$N-$src"
        for ((i = 0; i < N; i++)); do
            "$P" pack "$T/$src" "$T/j$N-$src/part-$i" --shard-size 4K --part $i/$N --quiet \
                2>"$T/err" || fail "$src: pack part $i/$N: $(cat "$T/err")"
        done
        q=quick
        ((N == 3)) && q=
        same_records "$T/w-$src" "$T/j$N-$src" $q ||
            fail "$src: $N parts differ from the whole pack"
    done
    pass "$src: parts (N = $Ns) equal one pack, record for record"
done
# the two layouts give the same records (names, classes, bytes)
same_records "$T/w-nested.tar" "$T/w-flat.tar" || fail "the tar of tars and the class-folder tar differ"
"$P" extract "$T/j3-nested.tar" 4 -o "$T/x.bin" 2>"$T/err" && expect_err "0cat/sub/c_9.JPEG" \
    "record 4 is the sub-folder's image (sorted by path component)"

# --shuffle: every task lists the whole job, then takes its part of the permutation
"$P" pack "$T/nested.tar" "$T/wshuf" --shard-size 4K --shuffle --seed 5 --quiet || die "shuffled pack"
mkdir -p "$T/jshuf"
for i in 0 1 2; do
    "$P" pack "$T/nested.tar" "$T/jshuf/part-$i" --shard-size 4K --shuffle --seed 5 --part $i/3 \
        --quiet || fail "shuffled part $i/3"
done
same_records "$T/wshuf" "$T/jshuf" quick && pass "--shuffle: parts equal the shuffled pack" ||
    fail "--shuffle: the parts differ from the whole pack"

# a requeued task whose part is complete: --resume is a no-op, the part unchanged
before=$(dump "$T/j3-nested.tar/part-2")
"$P" pack "$T/nested.tar" "$T/j3-nested.tar/part-2" --shard-size 4K --part 2/3 --resume --quiet ||
    fail "--resume of a complete part"
[[ "$(dump "$T/j3-nested.tar/part-2")" == "$before" ]] && pass "--resume of a complete part" ||
    fail "--resume changed a complete part"

# a duplicate member (in the last class): every part refuses it, as the whole pack does
for spec in "" "--part 0/4" "--part 3/4"; do
    # shellcheck disable=SC2086
    expect_status 1 "duplicate member ${spec:-(one process)}" -- \
        "$P" pack "$T/dup.tar" "$T/dx" --shard-size 4K $spec --quiet &&
        expect_err "dup.tar:3fish.tar:f_1.JPEG: listed twice in the tar" "the duplicate is named"
done
# skip mode: the later copy is kept, by the parts as by the whole pack
"$P" pack "$T/dup.tar" "$T/dw" --shard-size 4K --on-error skip --quiet 2>/dev/null ||
    fail "skip pack of dup.tar"
[[ $(recs "$T/dw") == "$n" ]] || fail "dup.tar skip: $(recs "$T/dw") records, want $n"
mkdir -p "$T/dj"
for i in 0 1 2 3; do
    "$P" pack "$T/dup.tar" "$T/dj/part-$i" --shard-size 4K --on-error skip --part $i/4 \
        --quiet 2>/dev/null || fail "skip part $i/4 of dup.tar"
done
same_records "$T/dw" "$T/dj" && pass "--on-error skip: a duplicate is dropped alike by parts and whole" ||
    fail "--on-error skip: the parts of dup.tar differ from its whole pack"
"$P" extract "$T/dw" 19 -o "$T/last.bin" 2>/dev/null &&
    "$P" extract "$T/w-nested.tar" 19 -o "$T/orig.bin" 2>/dev/null &&
    ! cmp -s "$T/last.bin" "$T/orig.bin" && pass "the later copy of a duplicate is the one kept" ||
    fail "the duplicate's later copy is not the one kept"
expect_status 2 "more parts than inputs" -- "$P" pack "$T/nested.tar" "$T/x" --part 0/23 &&
    expect_err "has 22 inputs, so a job can have at most 22 parts" "the input count is named"
finish
