#!/usr/bin/env bash
# test_lmdb_truncated.sh — an LMDB dataset whose data.mdb was truncated
# before it is opened made `packdata info`, `verify` and `fastload bench` (also --on-corrupt skip,
# --io pread) die with SIGBUS (exit 135). Every one must exit 1 with one clear error naming
# data.mdb and saying it is truncated: at several sizes, with the manifest intact (its "bytes"
# disagree), and with the manifest's "bytes" edited to the truncated size (LMDB's own last used
# page must then give it away).
. "$(dirname "$0")/lib.sh"
need "$P" "$MKIDX" "$FLT"
"$MKIDX" "$T/idx" 3000 || die "fixture"
"$P" pack "$T/idx" "$T/ref" --backend lmdb --compress none --quiet 2>"$T/err" || die "pack: $(cat "$T/err")"
size=$(stat -c %s "$T/ref/data.mdb")
[[ $size -gt 65536 ]] || die "fixture data.mdb too small ($size bytes)"
grep -q "\"bytes\": $size}" "$T/ref/manifest.json" || die "manifest does not record data.mdb's size $size"
expect_status 0 "intact dataset verifies" -- "$P" verify "$T/ref"

cmds=("packdata info" "packdata verify" "fastload bench" "fastload bench --on-corrupt skip"
      "fastload bench --io pread")
run_tool() { # run_tool "TOOL ARGS" DS
    local tool=${1%% *} rest=${1#* } ds=$2 exe
    [[ $tool == packdata ]] && exe=$P || exe=$FLT
    [[ $rest == "$1" ]] && rest=""
    if [[ $tool == fastload ]]; then
        # shellcheck disable=SC2086
        "$exe" bench "$ds" ${rest#bench} --batch 64 --workers 2 --quiet
    else
        # shellcheck disable=SC2086
        "$exe" $rest "$ds"
    fi
}

check_all() { # check_all LABEL DS NEEDLE
    local label=$1 ds=$2 needle=$3 c rc
    for c in "${cmds[@]}"; do
        run_tool "$c" "$ds" >"$T/out" 2>"$T/err"
        rc=$?
        if [[ $rc -ne 1 ]]; then
            fail "$label: $c: exit $rc, want 1$([[ $rc -gt 128 ]] && echo " (signal $((rc - 128)))")"
            sed 's/^/    /' "$T/err" | head -3
            continue
        fi
        expect_err "data.mdb" "$label: $c: names data.mdb" || continue
        expect_err "$needle" "$label: $c: says why" || continue
    done
    pass "$label: $(grep -m1 error "$T/err" | sed "s|$T/||g")"
}

for cut in 0 100 4096 8192 $((size / 2)) $((size - 4096)) $((size - 1)); do
    rm -rf "$T/ds" && cp -r "$T/ref" "$T/ds"
    truncate -s "$cut" "$T/ds/data.mdb"
    check_all "truncated to $cut of $size bytes" "$T/ds" "truncated"
done
# a file truncated after the manifest was written: the manifest's "bytes" agree with the short
# file, LMDB's meta page still claims the pages that are gone
for cut in $((size / 2)) $((size - 4096)); do
    rm -rf "$T/ds" && cp -r "$T/ref" "$T/ds"
    truncate -s "$cut" "$T/ds/data.mdb"
    sed -i "s/\"bytes\": $size}/\"bytes\": $cut}/" "$T/ds/manifest.json"
    check_all "truncated to $cut bytes, manifest edited to match" "$T/ds" "truncated"
done
finish
