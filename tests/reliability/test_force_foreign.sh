#!/usr/bin/env bash
# test_force_foreign.sh — `packdata pack SRC DST --force` replaces only a fastload dataset that
# packdata wrote, refuses `pack SRC . --force` (which would leave `..partial/`) and names a
# missing DST parent as such (not as "DST.partial: cannot create"). Each refusal exits 2, names the path
# (or the first foreign file) and leaves every file byte-identical: a user's folder, SRC itself,
# `.`, `dir/..`, a plain file, a dataset folder holding a file of the user's or a sub-folder, a
# DST.partial that is not ours, a DST.lock that is a user's file, DST inside SRC and SRC inside
# DST. A real replacement (shards -> LMDB -> shards, trailing slash) still works and leaves
# nothing behind (no DST.partial, DST.old-*, DST.lock). An empty DST folder is packed into.
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX"
"$MKIDX" "$T/idx" 300 >/dev/null || die "fixture"
args=(--compress none --quiet)

# fingerprint DIR: every path, type, size and content hash under DIR (sub-folders included)
fingerprint() {
    (cd "$1" && find . -printf '%p %y %s\n' | sort && find . -type f -print0 | sort -z | xargs -0r sha256sum)
}
# refused NAME DST [extra args]: exit 2, stderr names $3 (default DST), nothing changed under $T/w
refused() {
    local what=$1 dst=$2 name=${3:-$2}
    shift 3
    local before after
    before=$(fingerprint "$T/w")
    expect_status 2 "$what: refused" -- "$P" pack "$T/w/src" "$dst" "${args[@]}" --force "$@" &&
        expect_err "$name" "$what: the message names $name"
    grep -q "nothing was changed" "$T/err" || fail "$what: the message does not say nothing was changed: $(cat "$T/err")"
    after=$(fingerprint "$T/w")
    [[ $before == "$after" ]] || { fail "$what: files changed"; diff <(echo "$before") <(echo "$after") | head -5; }
}

mkdir -p "$T/w"
cp -r "$T/idx" "$T/w/src"
# a user's folder: files at the top, a sub-folder, a file named like ours
mkdir -p "$T/w/user/photos"
echo "my notes" >"$T/w/user/notes.txt"
head -c 5000 /dev/urandom >"$T/w/user/photos/a.jpg"
echo "not a shard" >"$T/w/user/shard-00000.fls"
refused "a user's folder" "$T/w/user" "$T/w/user"
refused "a user's folder, trailing slash" "$T/w/user/" "$T/w/user"
# SRC itself, and the folders around it
refused "SRC itself" "$T/w/src" "$T/w/src"
for d in src . user; do
    pushd "$T/w/$d" >/dev/null || die "cd $T/w/$d"
    refused "'.' (cwd $d)" . "."
    popd >/dev/null || die "popd"
done
refused "'dir/..' (a folder holding SRC)" "$T/w/user/.." ".."
refused "'dir/..' (a user's folder)" "$T/w/user/photos/.." ".."
refused "'dir/.'" "$T/w/user/." "."
[[ ! -e $T/..partial && ! -e $T/w/..partial && ! -e $T/w/src/..partial ]] || fail "a '..partial' was left behind"
# a plain file
echo "data" >"$T/w/file.txt"
refused "a plain file" "$T/w/file.txt" "$T/w/file.txt"
rm -f "$T/w/file.txt"
# DST inside SRC, SRC inside DST (with and without --force)
refused "DST inside SRC" "$T/w/src/out" "inside the source"
mkdir -p "$T/w/outer"
mv "$T/w/src" "$T/w/outer/src"
before=$(fingerprint "$T/w")
expect_status 2 "SRC inside DST" -- "$P" pack "$T/w/outer/src" "$T/w/outer" "${args[@]}" --force &&
    expect_err "inside the destination" "SRC inside DST: named"
[[ $before == "$(fingerprint "$T/w")" ]] || fail "SRC inside DST: files changed"
mv "$T/w/outer/src" "$T/w/src"
rmdir "$T/w/outer"

# a dataset of ours holding a file of the user's, or a sub-folder: refused, named
"$P" pack "$T/w/src" "$T/w/ds" "${args[@]}" 2>"$T/err" || die "pack ds: $(cat "$T/err")"
echo "keep me" >"$T/w/ds/README.txt"
refused "a dataset holding a user's file" "$T/w/ds" "README.txt"
rm "$T/w/ds/README.txt"
mkdir "$T/w/ds/extra"
refused "a dataset holding a sub-folder" "$T/w/ds" "extra"
rmdir "$T/w/ds/extra"
# a DST.partial that is not ours (no state of ours, a user's file in it)
mkdir "$T/w/ds.partial"
echo "draft" >"$T/w/ds.partial/thesis.tex"
refused "a DST.partial of the user's" "$T/w/ds" "thesis.tex"
rm -r "$T/w/ds.partial"
# a DST.lock that is somebody's file
echo "my lock notes" >"$T/w/ds.lock"
refused "a DST.lock that is a user's file" "$T/w/ds" "ds.lock"
rm "$T/w/ds.lock"
# a link where the dataset should be
ln -s "$T/w/user" "$T/w/link"
refused "a symbolic link" "$T/w/link" "$T/w/link"
rm "$T/w/link"
pass "--force refuses what packdata did not write (exit 2, path named, nothing changed)"

# a missing parent is named as such
expect_status 2 "missing DST parent" -- "$P" pack "$T/w/src" "$T/w/nope/ds" "${args[@]}"
expect_err "cannot create $T/w/nope/ds: parent folder $T/w/nope does not exist" "missing parent named"
[[ ! -e $T/w/nope ]] || fail "missing parent: something was created"
pass "a missing DST parent is named"

# real replacements still work, through every backend, and leave nothing behind
ref=$(fingerprint "$T/w/user")
expect_status 0 "--force over our dataset (shards -> lmdb)" -- "$P" pack "$T/w/src" "$T/w/ds" "${args[@]}" --force --backend lmdb
expect_status 0 "verify lmdb" -- "$P" verify "$T/w/ds"
expect_status 0 "--force over our dataset (lmdb -> shards, trailing slash)" -- "$P" pack "$T/w/src" "$T/w/ds/" "${args[@]}" --force --shuffle
expect_status 0 "verify shards" -- "$P" verify "$T/w/ds"
grep -q '"shuffle": *true' "$T/w/ds/manifest.json" || fail "the replacement is not the new dataset"
left=$(cd "$T/w" && ls -d ds.* ds/.partial 2>/dev/null)
[[ -z $left ]] || fail "left behind after --force: $left"
[[ "$(cd "$T/w/ds" && ls | grep -v -E '^(manifest.json|shard-[0-9]+\.fls)$')" == "" ]] || fail "the dataset holds other files: $(ls "$T/w/ds")"
[[ $ref == "$(fingerprint "$T/w/user")" ]] || fail "the user's folder changed"
pass "--force replaces a dataset of ours (shards <-> lmdb), nothing left behind"

# an empty folder made for the dataset (`mkdir out && packdata pack SRC out`) is taken, with or
# without --force, for both backends; one holding only a hidden file is the user's: refused
for be in shards lmdb; do
    for f in "" --force; do
        rm -rf "$T/w/empty" && mkdir "$T/w/empty"
        # shellcheck disable=SC2086
        expect_status 0 "an empty DST folder ($be $f)" -- "$P" pack "$T/w/src" "$T/w/empty" "${args[@]}" --backend $be $f &&
            expect_status 0 "verify the pack into an empty folder ($be $f)" -- "$P" verify "$T/w/empty"
    done
done
left=$(cd "$T/w" && ls -d empty.* 2>/dev/null)
[[ -z $left ]] || fail "left behind after packing into an empty folder: $left"
mkdir "$T/w/hidden" && echo "x" >"$T/w/hidden/.keep"
refused "a folder holding only a hidden file" "$T/w/hidden" "$T/w/hidden"
expect_status 2 "a folder holding only a hidden file, no --force" -- "$P" pack "$T/w/src" "$T/w/hidden" "${args[@]}"
[[ $(cat "$T/w/hidden/.keep") == x && $(ls -A "$T/w/hidden") == .keep ]] || fail "the hidden file changed"
pass "an empty DST folder is packed into; one with a hidden file is refused"
finish
