#!/bin/bash
# test_tar_imagefolder.sh — packdata packs an ImageFolder held in a tar without extracting it:
# ImageNet's layout (a tar of per-class tars), a tar of class folders (with a top folder, with
# "./"), and a .tar.gz give the same shards (byte for byte), classes and digest as packing the
# extracted folder; --resume after a kill mid-pack finishes to the same bytes; bad members
# (unsafe paths, links, an empty member, a truncated tar, a duplicate) are refused naming the tar
# and member, or skipped and reported under --on-error skip; --shuffle refuses a .tar.gz.
# Real photographs (python3-skimage's, through bench/make_photos.py); tars made with Python's
# tarfile.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
D="$B/tools/fastload/fastload"
S="${FL_SOURCE_DIR:?}"
$PY -c 'import PIL, skimage' 2>/dev/null || { echo "SKIP: needs python3-pil and python3-skimage"; exit 77; }
[[ -x $D ]] || { echo "SKIP: fastload not built"; exit 77; }

W="$T/tar"
mkdir -p "$W"
EXPECT_ERR="$T/err"
# expect_exit WANT WHAT command...: stderr kept in $EXPECT_ERR
expect_exit() {
    local want=$1 what=$2
    shift 2
    "$@" >"$T/out" 2>"$EXPECT_ERR"
    local got=$?
    if [[ $got -eq $want ]]; then pass "$what: exit $got"; else
        fail "$what: exit $got, want $want"
        sed 's/^/    /' "$EXPECT_ERR" | head -5
    fi
}
$PY "$S/bench/make_photos.py" "$W/folder" --count 36 --mean-pixels 5000 --quality 85 >/dev/null ||
    { echo "FAIL: make_photos"; exit 1; }
# the tars: nested (ImageNet), plain with a top folder, "./" names, gzip'ed
$PY - "$W" <<'EOF'
import io, os, sys, tarfile
w = sys.argv[1]; f = w + "/folder"
classes = sorted(os.listdir(f))
def add_bytes(t, name, data, **kw):
    ti = tarfile.TarInfo(name); ti.size = len(data)
    for k, v in kw.items(): setattr(ti, k, v)
    t.addfile(ti, io.BytesIO(data))
with tarfile.open(w + "/nested.tar", "w") as outer:
    for c in reversed(classes):  # tar order must not matter
        bio = io.BytesIO()
        with tarfile.open(fileobj=bio, mode="w") as inner:
            for n in sorted(os.listdir(f + "/" + c)):
                inner.add(f"{f}/{c}/{n}", arcname=n)
        add_bytes(outer, c + ".tar", bio.getvalue())
    add_bytes(outer, "README.txt", b"not an image\n")
with tarfile.open(w + "/plain.tar", "w") as t:
    t.add(f, arcname="train")
with tarfile.open(w + "/dot.tar", "w", format=tarfile.GNU_FORMAT) as t:
    t.add(f, arcname=".")
with tarfile.open(w + "/plain.tar.gz", "w:gz") as t:
    t.add(f, arcname="train")
# a .tar.gz of per-class tars: inner tars of a compressed tar cannot be read in place
with tarfile.open(w + "/nested.tar.gz", "w:gz") as t:
    t.add(w + "/nested.tar", arcname="x.tar")
one = f + "/" + classes[0] + "/" + sorted(os.listdir(f + "/" + classes[0]))[0]
data = open(one, "rb").read()
bad = {
    "dotdot": [("train/a/../../evil.jpg", dict())],
    "abs": [("/abs/evil.jpg", dict())],
    "symlink": [("train/" + classes[0] + "/link.jpg", dict(type=tarfile.SYMTYPE, linkname="x.jpg"))],
    "hardlink": [("train/" + classes[0] + "/hard.jpg", dict(type=tarfile.LNKTYPE, linkname="train/" + classes[1] + "/x.jpg"))],
    "empty": [("train/" + classes[0] + "/zero.jpg", dict())],
    "dup": [("train/" + classes[0] + "/" + os.path.basename(one), dict())],
}
for name, extra in bad.items():
    with tarfile.open(f"{w}/bad-{name}.tar", "w") as t:
        t.add(f, arcname="train")
        for n, kw in extra:
            ti = tarfile.TarInfo(n)
            payload = b"" if name in ("empty",) or "type" in kw else data
            ti.size = len(payload)
            for k, v in kw.items(): setattr(ti, k, v)
            t.addfile(ti, io.BytesIO(payload))
# truncated: cut inside the data of a member two thirds in
b = open(w + "/plain.tar", "rb").read()
open(w + "/trunc.tar", "wb").write(b[: len(b) * 2 // 3 + 100])
EOF
[[ -f $W/trunc.tar ]] || { echo "FAIL: making the tars"; exit 1; }

if "$P" pack "$W/plain.tar" "$W/probe" -q 2>&1 | grep -q "without libarchive"; then
    echo "SKIP: packdata built without libarchive"
    exit 77
fi

# the manifest without what names the source
man() { $PY -c 'import json,sys; m=json.load(open(sys.argv[1]+"/manifest.json")); m.pop("options"); m.pop("created",None); print(json.dumps(m, sort_keys=True))' "$1"; }
same_as_folder() { # DST label
    local d=$1 what=$2 ok=1
    for f in "$W/ref"/shard-*.fls; do cmp -s "$f" "$d/$(basename "$f")" || ok=0; done
    [[ "$(man "$W/ref")" == "$(man "$d")" ]] || ok=0
    [[ "$("$D" digest "$d" --size 32 2>/dev/null | tail -1)" == "$refdigest" ]] || ok=0
    if ((ok)); then pass "$what: same shards, manifest and digest as the extracted folder"
    else fail "$what differs from packing the extracted folder"; fi
}

"$P" pack "$W/folder" "$W/ref" -q --shard-size 64K || fail "pack the folder"
refdigest="$("$D" digest "$W/ref" --size 32 | tail -1)"
for src in nested.tar plain.tar dot.tar plain.tar.gz; do
    "$P" pack "$W/$src" "$W/out-$src" -q --shard-size 64K 2>"$W/e" || { fail "pack $src: $(cat "$W/e")"; continue; }
    same_as_folder "$W/out-$src" "$src"
done
grep -q "ignored 1 member" <("$P" pack "$W/nested.tar" "$W/note" 2>&1) &&
    pass "nested.tar: a non-image member is ignored with a note" || fail "no note about README.txt"
# raw + zstd (dictionary pass reads members out of order before the ordered pack) on the .tar.gz
"$P" pack "$W/folder" "$W/rawref" -q --encode raw --resize 24x24 --workers 2 &&
    "$P" pack "$W/plain.tar.gz" "$W/rawgz" -q --encode raw --resize 24x24 --workers 2 &&
    cmp -s "$W/rawref/shard-00000.fls" "$W/rawgz/shard-00000.fls" &&
    pass ".tar.gz, raw + zstd dictionary, 2 workers: same shard as the folder" || fail ".tar.gz raw differs"
# --shuffle: deterministic, equal to the shuffled folder on a plain tar; refused on a .tar.gz
"$P" pack "$W/folder" "$W/shf" -q --shuffle --seed 7 && "$P" pack "$W/nested.tar" "$W/shn" -q --shuffle --seed 7 2>/dev/null &&
    cmp -s "$W/shf/shard-00000.fls" "$W/shn/shard-00000.fls" && pass "--shuffle on a tar: same as the folder" ||
    fail "--shuffle on a tar differs"
expect_exit 2 "--shuffle on a .tar.gz" "$P" pack "$W/plain.tar.gz" "$W/shgz" -q --shuffle
grep -q "compressed tar" "$EXPECT_ERR" && pass "  says why" || fail "--shuffle .tar.gz message: $(cat "$EXPECT_ERR")"
[[ ! -e $W/shgz ]] || fail "--shuffle .tar.gz left DST"
expect_exit 1 "per-class tars inside a .tar.gz" "$P" pack "$W/nested.tar.gz" "$W/ngz" -q
grep -q "decompress" "$EXPECT_ERR" && pass "  says to decompress it" || fail "nested .tar.gz message: $(cat "$EXPECT_ERR")"

# --resume after a kill mid-pack: the same bytes as an uninterrupted pack
for src in nested.tar plain.tar.gz; do
    rm -rf "$W/res"
    (PACKDATA_TEST_KILL_AFTER=20 "$P" pack "$W/$src" "$W/res" -q --shard-size 16K --workers 2; true) 2>/dev/null
    [[ -d $W/res.partial ]] || { fail "$src: no DST.partial after the kill"; continue; }
    "$P" pack "$W/$src" "$W/res" -q --shard-size 16K --workers 2 --resume 2>"$W/e" || { fail "$src --resume: $(cat "$W/e")"; continue; }
    "$P" pack "$W/$src" "$W/full" -q --shard-size 16K --force 2>/dev/null
    ok=1
    for f in "$W/full"/shard-*.fls; do cmp -s "$f" "$W/res/$(basename "$f")" || ok=0; done
    [[ "$(man "$W/full")" == "$(man "$W/res")" ]] || ok=0
    ((ok)) && pass "$src: kill after 20 records + --resume = uninterrupted pack" || fail "$src: resumed pack differs"
done
# a changed tar is not the same job
rm -rf "$W/res"
cp "$W/plain.tar" "$W/chg.tar"
(PACKDATA_TEST_KILL_AFTER=10 "$P" pack "$W/chg.tar" "$W/res" -q --shard-size 16K; true) 2>/dev/null
touch -d '2001-01-01' "$W/chg.tar"
expect_exit 2 "--resume over a tar that changed" "$P" pack "$W/chg.tar" "$W/res" -q --shard-size 16K --resume

# bad members: refused naming the tar and the member (exit 1, nothing at DST), or skipped
check_bad() { # name what-the-message-says
    local n=$1 why=$2
    expect_exit 1 "bad-$n.tar" "$P" pack "$W/bad-$n.tar" "$W/b-$n" -q
    grep -q "bad-$n.tar:" "$EXPECT_ERR" && grep -q "$why" "$EXPECT_ERR" &&
        pass "  names the tar and member: $why" || fail "bad-$n message: $(cat "$EXPECT_ERR")"
    [[ ! -e $W/b-$n && ! -e $W/b-$n.partial ]] || fail "bad-$n left something at DST"
    "$P" pack "$W/bad-$n.tar" "$W/s-$n" -q --on-error skip --report "$W/rep-$n" 2>/dev/null &&
        grep -q "bad-$n.tar:" "$W/rep-$n" && [[ -d $W/s-$n ]] &&
        pass "  --on-error skip: packed, reported" || fail "bad-$n under --on-error skip"
}
check_bad dotdot "unsafe member path"
check_bad abs "unsafe member path"
check_bad symlink "link member"
check_bad hardlink "link member"
check_bad empty "empty file"
check_bad dup "listed twice"
recs() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]+"/manifest.json"))["records"])' "$1"; }
[[ "$(recs "$W/s-dotdot")" == 36 ]] && pass "  the unsafe member is not a record, the 36 photos are" ||
    fail "bad-dotdot skip: $(recs "$W/s-dotdot") records"
expect_exit 1 "truncated tar" "$P" pack "$W/trunc.tar" "$W/b-trunc" -q
grep -q "trunc.tar" "$EXPECT_ERR" && pass "  names the tar" || fail "truncated message: $(cat "$EXPECT_ERR")"
[[ ! -e $W/b-trunc && ! -e $W/b-trunc.partial ]] || fail "truncated tar left something at DST"
"$P" pack "$W/trunc.tar" "$W/s-trunc" -q --on-error skip --report "$W/rep-trunc" 2>/dev/null &&
    n=$(recs "$W/s-trunc") && ((n > 10 && n < 36)) && grep -q "trunc.tar" "$W/rep-trunc" &&
    pass "truncated tar under --on-error skip: the $n complete members packed, the tar reported" ||
    fail "truncated tar under --on-error skip"
# damaged tars (bytes overwritten in headers and data, cut short): a clean exit, never a crash or
# a sanitizer report (exit >= 86 under FL_SANITIZE builds)
$PY - "$W" <<'EOF'
import random, sys
w = sys.argv[1]
rng = random.Random(5)
for name in ("nested.tar", "plain.tar"):
    b = open(f"{w}/{name}", "rb").read()
    for k in range(8):
        d = bytearray(b)
        for _ in range(rng.randint(1, 40)):
            # mostly header fields (blocks of 512 bytes: name, size, checksum, magic ...), some data
            at = rng.randrange(0, len(d) // 512) * 512 + rng.choice([0, 100, 124, 148, 156, 257, 345, rng.randrange(512)])
            if at < len(d): d[at] = rng.randrange(256)
        if k % 3 == 2: d = d[: rng.randrange(len(d))]
        open(f"{w}/dmg-{name}-{k}.tar", "wb").write(bytes(d))
EOF
worst=0
for f in "$W"/dmg-*.tar; do
    for mode in fail skip; do
        "$P" pack "$f" "$W/dmg-out" -q --on-error $mode >/dev/null 2>&1
        rc=$?
        rm -rf "$W/dmg-out"
        ((rc > worst)) && worst=$rc
        ((rc > 2)) && fail "$(basename "$f") --on-error $mode: exit $rc"
    done
done
((worst <= 2)) && pass "16 damaged tars, --on-error fail and skip: exit 0, 1 or 2, no crash"
finish
