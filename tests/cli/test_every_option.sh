#!/usr/bin/env bash
# test_every_option.sh — every option of every tool and sub-command, read from its own --help, tried
# with careless values (a value-less option once made `packdata pack SRC DST --jpeg-restart` read
# an uninitialised pointer). Sub-commands come from each tool's top-level --help, options from
# `TOOL SUB --help`, so a new option is covered the day it is documented.
#
# Each value option is given: no value (option last on the line), "", -1, 0, nan, 1e309,
# 99999999999999999999, a 10,000-character string; then twice with a sample valid value (must
# run), and once with "" followed by a valid value (must still fail: every value given is checked;
# the last one wins). Each flag is given alone, twice, and as --flag=1 (must be refused).
# Every run gets valid positional arguments (a tiny dataset packed here) and a timeout.
# Asserted: never a signal (exit >= 128) or a sanitizer report (86), never a hang; an invalid value
# exits 2 with ONE line on stderr naming the option. Values that are valid for an option are
# listed in OK_VALUES below and must run (exit 0, or 1 for a real data error); free-text and path
# options (TEXT below) accept any non-empty string, so there a value may also fail (1 or 2) for
# what it names (no such file, no such column), but never with a signal.
set -u
B="${FL_BINARY_DIR:?FL_BINARY_DIR not set (run through ctest)}"
PD="$B/tools/packdata/packdata"
FLT="$B/tools/fastload/fastload"
TF="$B/trainer/trainfast"
FIX="$B/tests/packdata/pd_fixture"
MK="$B/tests/trainer/tf_make_dataset"
for t in "$PD" "$FLT" "$TF" "$FIX" "$MK"; do
    [[ -x "$t" ]] || { echo "SKIP: $t not built"; exit 77; }
done
command -v timeout >/dev/null || { echo "SKIP: no timeout(1)"; exit 77; }
T="$(mktemp -d "${TMPDIR:-/tmp}/every-option.XXXXXX")"
trap 'rm -rf "$T"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:exitcode=86"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1:exitcode=86"
TO="${FL_OPTION_TIMEOUT:-30}"   # seconds per run; every valid run here takes well under one

failures=0
fail() {
    failures=$((failures + 1))
    [[ $failures -le 60 ]] && echo "FAIL: $*"
}

# ---- fixtures: tiny real datasets -------------------------------------------------------------
"$FIX" make "$T/fx" >/dev/null || { echo "FAIL: fixture"; exit 1; }
"$PD" pack "$T/fx/png" "$T/ds" --encode raw --quiet || { echo "FAIL: pack fixture"; exit 1; }
"$MK" "$T/tr" 16 16 16 1 4 1 >/dev/null || { echo "FAIL: trainer fixture"; exit 1; }
"$TF" train --data "$T/tr" --val "$T/tr" --epochs 1 --batch 8 --width 4 --threads 1 --workers 1 \
    --quiet --checkpoint "$T/ck" >/dev/null 2>&1 || { echo "FAIL: trainer checkpoint fixture"; exit 1; }
printf '{"epoch":1,"lr":0.1,"train_loss":1.2,"val_top1":0.5,"points":[{"x":0.5,"loss":1.3}]}\n' > "$T/fx.jsonl"
# sources with fields: a COCO file and JSON Lines over the fixture's images, an image/mask pair
cat >"$T/fx/coco.json" <<'EOF'
{"images": [{"id": 1, "file_name": "png/0cat/img_0.png", "width": 24, "height": 16},
            {"id": 2, "file_name": "png/1dog/img_10.png", "width": 24, "height": 16}],
 "annotations": [{"id": 1, "image_id": 1, "category_id": 3, "bbox": [2, 2, 10, 8], "area": 80,
                  "iscrowd": 0, "segmentation": [[2, 2, 12, 2, 12, 10, 2, 10]]}],
 "categories": [{"id": 3, "name": "cat"}, {"id": 5, "name": "dog"}]}
EOF
printf '{"path": "png/0cat/img_0.png", "label": 0, "score": 0.5}\n{"path": "png/1dog/img_10.png", "label": 1, "score": 1.5}\n' >"$T/fx/data.jsonl"
mkdir -p "$T/mimg" "$T/mmask"
cp "$T/fx/png/0cat/img_0.png" "$T/mimg/a.png"
# the mask: an 8-bit gray PNG of the image's size (a gray raw pack's record, extracted)
"$PD" pack "$T/fx/png" "$T/gray" --encode raw --gray --quiet && "$PD" extract "$T/gray" 0 -o "$T/mmask/a.png" 2>/dev/null ||
    { echo "FAIL: mask fixture"; exit 1; }
CKPT=$(ls "$T"/ck/*.tfc 2>/dev/null | head -1)
[[ -n "$CKPT" ]] || { echo "FAIL: no checkpoint written"; exit 1; }
mkdir -p "$T/cwd"   # runs start here: output options given "0" or "-1" write files here

LONG=$(head -c 10000 /dev/zero | tr '\0' 'x')
VALUES=("" -1 0 nan 1e309 99999999999999999999 "$LONG")
vname() { [[ ${#1} -gt 30 ]] && echo "<${#1} chars>" || echo "'$1'"; }

# ---- per sub-command: positional arguments and options that keep each run short ---------------
# @DST is replaced by a fresh output path per run.
declare -A POS BASE
POS[pack]="$T/fx/png @DST";  BASE[pack]="--workers 1"
POS[info]="$T/ds";           BASE[info]=""
POS[verify]="$T/ds";         BASE[verify]=""
POS[extract]="$T/ds 0";      BASE[extract]=""
POS[bench]="$T/ds";          BASE[bench]="--batch 4 --workers 1 --epochs 1"
POS[digest]="$T/ds";         BASE[digest]="--batch 4 --workers 1 --epochs 1"
POS[train]="";               BASE[train]="--data $T/tr --val $T/tr --epochs 1 --batch 8 --width 4 --threads 1 --workers 1 --quiet"
POS[eval]="$CKPT $T/tr";     BASE[eval]="--threads 1"
POS[predict]="$CKPT $T/tr";  BASE[predict]="--threads 1"
POS[doctor]="";              BASE[doctor]=""
POS[export]="$CKPT";         BASE[export]="-o m.onnx"
POS[report]="$T/fx.jsonl";   BASE[report]=""
# positional arguments for options that only mean something with another kind of SRC
declare -A OPT_POS=(
    ["pack --idx"]="@DST" ["pack --csv"]="@DST"
    ["pack --root"]="$T/fx/list.txt @DST"
    ["pack --path-column"]="$T/fx/data.csv @DST" ["pack --label-column"]="$T/fx/data.csv @DST"
    ["pack --split"]="$T/fx/idx @DST" ["pack --cifar100-labels"]="$T/fx/cifar100 @DST"
    ["pack --num-classes"]="$T/fx/list.txt @DST" ["pack --classes"]="$T/fx/list.txt @DST"
    ["pack --class-names"]="$T/fx/list.txt @DST"
    ["pack --wds"]="@DST" ["pack --coco"]="@DST" ["pack --masks"]="@DST" ["pack --jsonl"]="@DST"
    ["pack --field"]="@DST" ["pack --mask-dir"]="$T/mimg @DST" ["pack --mask-suffix"]="$T/mimg @DST"
    ["pack --image-suffix"]="$T/mimg @DST" ["pack --mask-codec"]="$T/mimg @DST"
    ["pack --no-image"]="@DST"
)
# options that need another option to mean anything (given before the option under test)
declare -A OPT_ARGS=(
    ["pack --quality"]="--encode jpeg" ["pack --max-side"]="--encode jpeg"
    ["pack --resize"]="--encode raw" ["pack --gray"]="--encode raw"
    ["pack --no-dictionary"]="--encode raw" ["pack --jpeg-restart"]="--encode jpeg"
    ["bench --scale"]="--augment rrc" ["bench --ratio"]="--augment rrc"
    ["digest --scale"]="--augment rrc" ["digest --ratio"]="--augment rrc"
    ["bench --memcpy-bytes"]="--memcpy"
    ["bench --quasi-block"]="--order quasi" ["bench --quasi-window"]="--order quasi"
    ["digest --quasi-block"]="--order quasi" ["digest --quasi-window"]="--order quasi"
    ["pack --coco"]="--root $T/fx" ["pack --masks"]="--coco $T/fx/coco.json --root $T/fx"
    ["pack --field"]="--jsonl $T/fx/data.jsonl"
    ["pack --mask-suffix"]="--mask-dir $T/mmask" ["pack --image-suffix"]="--mask-dir $T/mmask"
    ["pack --mask-codec"]="--mask-dir $T/mmask"
    ["pack --no-image"]="--jsonl $T/fx/data.jsonl --field score:float"
)
# options taking two values
declare -A ARITY2=(["pack --idx"]=1)
# Free text and paths: any non-empty string is a well-formed value.
declare -A TEXT=(
    ["pack --root"]=1 ["pack --csv"]=1 ["pack --idx"]=1 ["pack --path-column"]=1
    ["pack --label-column"]=1 ["pack --split"]=1 ["pack --classes"]=1 ["pack --class-names"]=1
    ["pack --report"]=1 ["pack --wds"]=1 ["pack --coco"]=1 ["pack --jsonl"]=1 ["pack --mask-dir"]=1
    ["pack --mask-suffix"]=1 ["pack --image-suffix"]=1 ["extract -o"]=1 ["extract --output"]=1
    ["train --data"]=1 ["train --val"]=1 ["train --checkpoint"]=1
    ["predict --logits"]=1 ["predict --csv"]=1
    ["train --log"]=1
    ["export -o"]=1 ["export --output"]=1
    ["train --report"]=1 ["report -o"]=1 ["report --output"]=1 ["report --title"]=1
)
# Values among -1 0 nan 1e309 99999999999999999999 that ARE valid for a numeric option (they must
# run: exit 0, or 1 for a data error). Everything else not listed must be refused with exit 2.
declare -A OK_VALUES=(
    ["pack --seed"]="0"
    ["bench --seed"]="0" ["digest --seed"]="0"
    ["bench --workers"]="0" ["digest --workers"]="0"           # 0: one per online CPU
    ["bench --size"]="0" ["digest --size"]="0"                 # 0: the dataset's own size
    ["bench --start-epoch"]="0" ["digest --start-epoch"]="0"
    ["bench --start-batch"]="0" ["digest --start-batch"]="0"
    ["bench --rank"]="0" ["digest --rank"]="0"
    ["bench --device"]="0" ["digest --device"]="0"             # no GPU here: exit 1 is fine
    ["bench --box-min-visible"]="0" ["digest --box-min-visible"]="0" # 0: keep any visible box
    ["bench --decode-memory"]="0" ["digest --decode-memory"]="0"   # 0: the default budget (1 GiB)
    ["bench --jpeg-index-memory"]="0" ["digest --jpeg-index-memory"]="0"   # 0: the default (RAM/32, at most 512M)
    ["train --seed"]="0" ["train --wd"]="0" ["train --momentum"]="0"
    ["train --label-smoothing"]="0" ["train --warmup"]="0" ["train --ema"]="0"
    ["train --crop-pad"]="0"
)
# A valid value for each value option (used for the "given twice" runs). A new option without
# one fails the test: add it here. "-" means: do not run it twice with a valid value (says why).
declare -A SAMPLE=(
    ["pack --idx"]="$T/fx/idx-plain-images $T/fx/idx-plain-labels" ["pack --csv"]="$T/fx/data.csv"
    ["pack --root"]="$T/fx" ["pack --path-column"]="path" ["pack --label-column"]="label"
    ["pack --split"]="train" ["pack --cifar100-labels"]="coarse" ["pack --num-classes"]="3"
    ["pack --classes"]="$T/fx/cifar10/batches.meta.txt" ["pack --class-names"]="a,b,c"
    ["pack --encode"]="raw" ["pack --quality"]="80" ["pack --jpeg-restart"]="row"
    ["pack --max-side"]="12" ["pack --resize"]="8x8" ["pack --compress"]="zstd:3"
    ["pack --backend"]="lmdb" ["pack --shard-size"]="64K" ["pack --seed"]="7" ["pack --part"]="0/2"
    ["pack --workers"]="2" ["pack --on-error"]="skip" ["pack --report"]="report.tsv"
    ["pack --max-pixels"]="1000000"
    ["pack --wds"]="$T/fx/no-such-shards.tar"   # well-formed; the missing file is a data error (exit 1)
    ["pack --coco"]="$T/fx/coco.json" ["pack --jsonl"]="$T/fx/data.jsonl" ["pack --mask-dir"]="$T/mmask"
    ["pack --mask-suffix"]=".png" ["pack --image-suffix"]=".png" ["pack --mask-codec"]="zstd"
    ["pack --field"]="-"   # repeatable: each adds a field, so the same field twice is a usage error
    ["extract -o"]="x.png" ["extract --output"]="x.png"
    ["bench --workers"]="1" ["bench --batch"]="4" ["bench --size"]="8" ["bench --augment"]="rrc,flip"
    ["bench --scale"]="0.5,1" ["bench --ratio"]="0.75,1.3333" ["bench --order"]="seq"
    ["bench --seed"]="3" ["bench --epochs"]="1" ["bench --start-epoch"]="1" ["bench --start-batch"]="1"
    ["bench --rank"]="0" ["bench --world"]="2" ["bench --io"]="pread" ["bench --queue-depth"]="4" ["bench --quasi-block"]="8" ["bench --quasi-window"]="4"
    ["bench --prefetch"]="2" ["bench --on-corrupt"]="skip" ["bench --decode"]="fast" ["bench --box-min-visible"]="0.5"
    ["bench --device"]="0" ["bench --batches"]="1" ["bench --memcpy-bytes"]="1M"
    ["bench --decode-memory"]="256M"
    ["bench --jpeg-index-memory"]="64M"
    ["digest --jpeg-index-memory"]="64M"
    ["train --data"]="$T/tr" ["train --val"]="$T/tr" ["train --model"]="fastcnn" ["train --width"]="4"
    ["train --epochs"]="1" ["train --batch"]="8" ["train --lr"]="0.1" ["train --wd"]="0.001"
    ["train --momentum"]="0.8" ["train --label-smoothing"]="0.05" ["train --schedule"]="cosine"
    ["train --warmup"]="0.1" ["train --accum"]="2" ["train --ema"]="0.9" ["train --crop-pad"]="2"
    ["train --size"]="16" ["train --precision"]="fp32" ["train --device"]="cpu" ["train --workers"]="1"
    ["train --threads"]="1" ["train --seed"]="5" ["train --checkpoint"]="ckdir"
    ["train --cpu-backend"]="reference"
    ["eval --cpu-backend"]="reference"
    ["predict --cpu-backend"]="reference"
    ["train --checkpoint-every"]="1" ["train --log"]="log.jsonl"
    ["train --log-every"]="2" ["train --report"]="r.html"
    ["report -o"]="r.html" ["report --output"]="r.html" ["report --title"]="t"
    ["train --nproc"]="-"   # a valid --nproc re-executes under mpirun: not a parsing matter
    ["eval --batch"]="4" ["eval --threads"]="1" ["eval --device"]="cpu"
    ["predict --batch"]="4" ["predict --threads"]="1" ["predict --device"]="cpu" ["predict --top"]="2"
    ["predict --workers"]="1" ["predict --logits"]="l.npy" ["predict --csv"]="p.csv"
    ["export -o"]="m.onnx" ["export --output"]="m.onnx" ["export --batch"]="4" ["export --opset"]="13"
)
for k in "${!SAMPLE[@]}"; do   # digest shares bench's options
    [[ $k == bench* ]] && SAMPLE["digest ${k#bench }"]="${SAMPLE[$k]}"
done

runs=0
# run SUB OPT ARGS... : runs TOOL SUB with positional args, base options, then ARGS; sets rc and
# leaves stderr in $T/err
run() {
    local tool=$1 sub=$2 opt=$3
    shift 3
    local pos=${OPT_POS["$sub $opt"]-${POS[$sub]}}
    local dst="$T/out/r$runs"
    rm -rf "$T/out"
    mkdir -p "$T/out"
    pos=${pos//@DST/$dst}
    runs=$((runs + 1))
    # shellcheck disable=SC2086
    (cd "$T/cwd" && exec timeout -k 5 "$TO" "$tool" $sub $pos ${BASE[$sub]} ${OPT_ARGS["$sub $opt"]-} "$@") \
        >/dev/null 2>"$T/err" </dev/null
    rc=$?
}

# what: a description; want: "usage" (exit 2, one line naming opt), "ok" (0 or 1), "any" (0, 1 or 2)
check() {
    local what=$1 want=$2 opt=$3
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        fail "$what: hung (killed after ${TO}s)"
        return
    fi
    if [[ $rc -ge 86 ]]; then
        fail "$what: exit $rc (signal or sanitizer report)"
        sed 's/^/    /' "$T/err" | head -5
        return
    fi
    local nerr
    nerr=$(grep -c . "$T/err")
    case $want in
    usage)
        if [[ $rc -ne 2 ]]; then
            fail "$what: exit $rc, want 2"
            head -c 300 "$T/err" | sed 's/^/    /'
        elif [[ $nerr -ne 1 ]] || ! grep -qF -- "$opt" "$T/err"; then
            fail "$what: want one stderr line naming $opt, got $nerr:"
            head -c 600 "$T/err" | sed 's/^/    /'
        fi ;;
    ok)
        [[ $rc -le 1 ]] || { fail "$what: exit $rc, want 0 (or 1)"; head -c 300 "$T/err" | sed 's/^/    /'; } ;;
    any)
        if [[ $rc -gt 2 ]]; then
            fail "$what: exit $rc"
        elif [[ $rc -eq 2 ]] && [[ $(grep -c "error" "$T/err") -ne 1 ]]; then
            fail "$what: exit 2 with other than one error line:"
            head -c 600 "$T/err" | sed 's/^/    /'
        fi ;;
    esac
}

# options_of: reads a help text on stdin, prints "NAME value|flag" per option. An option takes a
# value when any mention is followed by a metavariable (a word with a capital letter or a '|').
options_of() {
    sed 's/`[^`]*`//g' |
        grep -oE '(^|[][ (,|])--?[A-Za-z][A-Za-z0-9-]*(=[^ ]*| [^ ]+)?' |
        sed -E 's/^[][ (,|]//' |
        awk '{
            name = $1; meta = $2
            if (index(name, "=")) { meta = substr(name, index(name, "=") + 1); name = substr(name, 1, index(name, "=") - 1) }
            sub(/[],.;:)]+$/, "", name)
            if (name ~ /^-[A-Za-z][A-Za-z0-9]/) next          # "-np" of mpirun, not ours
            if (name ~ /^--?$/ || name ~ /^(-h|--help|-V|--version)$/) next
            sub(/[],.;:)]+$/, "", meta)
            isval = (meta != "" && meta !~ /^[-[]/ && (meta ~ /[A-Z]/ || meta ~ /\|/))
            if (!(name in kind)) { order[++n] = name; kind[name] = "flag" }
            if (isval) kind[name] = "value"
        } END { for (i = 1; i <= n; i++) print order[i], kind[order[i]] }'
}

# subcommands_of TOOL: from the top-level help ("usage: TOOL sub ...", a "commands:" block)
subcommands_of() {
    local tool=$1 name
    name=$(basename "$tool")
    "$tool" --help 2>&1 | sed 's/`[^`]*`//g' | awk -v t="$name" '
        /^[a-zA-Z ]*commands:/ { inb = 1; next }
        inb && /^  [a-z][a-z-]* / { print $1; next }
        inb && !/^  / { inb = 0 }
        { for (i = 1; i < NF; i++) if ($i == t && $(i + 1) ~ /^[a-z][a-z-]*$/) print $(i + 1) }' |
        awk '!seen[$0]++'
}

declare -A tested
for tool in "$PD" "$FLT" "$TF"; do
    subs=$(subcommands_of "$tool")
    [[ -n "$subs" ]] || fail "$(basename "$tool") --help lists no sub-commands"
    for sub in $subs; do
        tname="$(basename "$tool") $sub"
        if ! "$tool" "$sub" --help >"$T/help" 2>"$T/err"; then
            fail "$tname --help exits non-zero"
            continue
        fi
        [[ -n "${POS[$sub]+x}" ]] || { fail "$tname: new sub-command: add its positional arguments to POS"; continue; }
        nopt=0
        while read -r opt kind; do
            nopt=$((nopt + 1))
            key="$sub $opt"
            tested[$key]=1
            if [[ $kind == flag ]]; then
                run "$tool" "$sub" "$opt" "$opt";               check "$tname $opt" any "$opt"
                run "$tool" "$sub" "$opt" "$opt" "$opt";        check "$tname $opt $opt (twice)" any "$opt"
                run "$tool" "$sub" "$opt" "$opt=1";             check "$tname $opt=1 (flag given a value)" usage "$opt"
                continue
            fi
            run "$tool" "$sub" "$opt" "$opt";                   check "$tname $opt (no value, last)" usage "$opt"
            for v in "${VALUES[@]}"; do
                args=("$opt" "$v")
                [[ -n "${ARITY2[$key]+x}" ]] && args+=("$v")
                run "$tool" "$sub" "$opt" "${args[@]}"
                want=usage
                if [[ -n "$v" && -n "${TEXT[$key]+x}" ]]; then
                    want=any
                elif [[ -n "$v" && " ${OK_VALUES[$key]-} " == *" $v "* ]]; then
                    want=ok
                fi
                check "$tname $opt $(vname "$v")" $want "$opt"
            done
            s=${SAMPLE[$key]-}
            if [[ -z "$s" ]]; then
                fail "$tname $opt: no sample value: add one to SAMPLE in $(basename "$0")"
                continue
            fi
            [[ "$s" == "-" ]] && s=""
            if [[ -n "$s" ]]; then
                # shellcheck disable=SC2086
                run "$tool" "$sub" "$opt" "$opt" $s "$opt" $s;  check "$tname $opt $s $opt $s (twice)" ok "$opt"
                # shellcheck disable=SC2086
                run "$tool" "$sub" "$opt" "$opt" "" "$opt" $s;  check "$tname $opt '' $opt $s (a bad value, then a good one)" usage "$opt"
            else
                run "$tool" "$sub" "$opt" "$opt" "" "$opt" 1;   check "$tname $opt '' $opt 1" usage "$opt"
            fi
        done < <(options_of < "$T/help")
        [[ $sub == doctor || $nopt -gt 0 ]] || fail "$tname --help lists no options"
    done
done
# every table entry must still name a documented option (a renamed option must not leave the
# test passing on nothing)
for k in "${!OK_VALUES[@]}" "${!TEXT[@]}" "${!OPT_POS[@]}" "${!OPT_ARGS[@]}"; do
    [[ -n "${tested[$k]+x}" ]] || fail "table entry '$k' is not an option any --help documents"
done

# last value wins (given twice): the manifest records the second seed
(cd "$T/cwd" && "$PD" pack "$T/fx/png" "$T/lw" --shuffle --seed 1 --seed 7 --quiet) 2>"$T/err" || fail "pack --seed 1 --seed 7"
grep -q '"seed":7' "$T/lw/manifest.json" 2>/dev/null || fail "--seed 1 --seed 7: the last value does not win"

echo "$runs runs"
if [[ $failures -ne 0 ]]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "all passed"
exit 0
