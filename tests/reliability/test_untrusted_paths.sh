#!/usr/bin/env bash
# test_untrusted_paths.sh — a list, CSV, JSONL or COCO file from elsewhere names paths under
# --root (or its own folder): one naming ../ or an absolute path outside, and an ImageFolder link
# (file or folder) leading out of SRC, are refused by name (exit 1, nothing written; --on-error
# skip reports them and packs the rest); --allow-outside-root packs them. Before, they were packed
# without a word and `extract` handed the outside files back.
. "$(dirname "$0")/lib.sh"
need "$P"
need_pil
"$PY" - "$T" <<'PY' || die "fixture images"
import os, sys
from PIL import Image
t = sys.argv[1]
for d, n, v in [("root/img", "a.png", 10), ("root/img", "b.png", 60), ("secret", "s.png", 200),
                ("src/cls", "a.png", 30)]:
    os.makedirs(os.path.join(t, d), exist_ok=True)
    Image.new("RGB", (8, 8), (v, v, v)).save(os.path.join(t, d, n))
PY
R="$T/root"

# refused NAME NEEDLE PACK-ARGS...: exit 1 naming the outside path (NEEDLE), nothing at DST; skip
# mode packs the one good record and reports the refused one; --allow-outside-root packs both
refused() {
    local name=$1 needle=$2
    shift 2
    expect_status 1 "$name (fail mode)" -- "$P" pack "$@" "$T/o-$name" --quiet --encode raw || return
    expect_err "$needle" "$name: names the refused path" || return
    grep -q "outside\|leading out" "$T/err" || { fail "$name: says why: $(cat "$T/err")"; return; }
    [[ ! -e $T/o-$name ]] || { fail "$name: fail mode wrote $T/o-$name"; return; }
    expect_status 0 "$name (skip mode)" -- "$P" pack "$@" "$T/s-$name" --quiet --encode raw --on-error skip || return
    expect_err "$needle" "$name: skip mode reports it" || return
    "$P" info "$T/s-$name" --json | grep -q '"records":1,' || { fail "$name: skip mode packs the other record"; return; }
    expect_status 0 "$name (--allow-outside-root)" -- "$P" pack "$@" "$T/a-$name" --quiet --encode raw --allow-outside-root || return
    "$P" info "$T/a-$name" --json | grep -q '"records":2,' || { fail "$name: --allow-outside-root packs both"; return; }
    pass "$name"
}

printf 'img/a.png 0\n../secret/s.png 1\n' >"$R/dotdot.txt"
refused "list ../" "../secret/s.png" "$R/dotdot.txt"
printf 'img/a.png 0\n%s 1\n' "$T/secret/s.png" >"$R/abs.txt"
refused "list absolute path" "$T/secret/s.png" "$R/abs.txt"
printf 'img/a.png 0\nimg/../../secret/s.png 1\n' >"$R/climb.txt"
refused "list climbing through a folder" "img/../../secret/s.png" "$R/climb.txt"
printf 'path,label\nimg/a.png,0\n../secret/s.png,1\n' >"$T/l.csv"
refused "CSV under --root" "../secret/s.png" --csv "$T/l.csv" --root "$R"
printf '{"path": "img/a.png", "label": 0}\n{"path": "../secret/s.png", "label": 1}\n' >"$R/l.jsonl"
refused "JSONL" "../secret/s.png" --jsonl "$R/l.jsonl"
cat >"$T/coco.json" <<'J'
{"images": [{"id": 1, "file_name": "img/a.png", "width": 8, "height": 8},
            {"id": 2, "file_name": "../secret/s.png", "width": 8, "height": 8}],
 "annotations": [], "categories": [{"id": 1, "name": "x"}]}
J
refused "COCO file_name" "../secret/s.png" --coco "$T/coco.json" --root "$R"
# inside paths stay fine: an absolute path under the root, ./ and a .. that stays inside
printf '%s 0\n./img/b.png 1\nimg/../img/a.png 0\n' "$R/img/a.png" >"$R/inside.txt"
expect_status 0 "paths that stay inside --root" -- "$P" pack "$R/inside.txt" "$T/inside" --quiet --encode raw &&
    pass "paths that stay inside --root are packed"

# ImageFolder: a file link and a folder link leading out of SRC
ln -s "$T/secret/s.png" "$T/src/cls/link.png"
refused "ImageFolder file link" "src/cls/link.png" "$T/src"
rm "$T/src/cls/link.png"
ln -s "$T/secret" "$T/src/zlinked"
refused "ImageFolder folder link" "src/zlinked" "$T/src"
rm "$T/src/zlinked"
ln -s "$T/src/cls/a.png" "$T/src/cls/inside.png"
expect_status 0 "ImageFolder link inside SRC" -- "$P" pack "$T/src" "$T/in-src" --quiet --encode raw &&
    pass "an ImageFolder link inside SRC is packed"
finish
