#!/usr/bin/env bash
# test_report.sh MODE — the HTML report (trainfast report, train --report; docs/REPORT.md).
#   page      a short real training run with --log and --report: one log line per epoch with the
#             report's fields and its points; every SVG polyline point maps back to the logged
#             value (check_report.py); `trainfast report` of the log gives the same page; two
#             logs give two series per chart and both names in the legends; strings from a log
#             (file name, configuration) are HTML-escaped; a log of the fields before the report
#             still draws; malformed lines fail naming FILE:LINE, a last line cut short is
#             skipped with a warning; usage errors exit 2
#   chromium  the page opened in headless Chromium (Debian `chromium`): the screenshot, wide and
#             narrow, is not blank and shows the charts' colours (check_report.py --png).
#             Skips (77) without chromium or python3-pil.
set -u
MODE=${1:?mode}
B="${FL_BINARY_DIR:?}"
S="${FL_SOURCE_DIR:?}"
TF="$B/trainer/trainfast"
MK="$B/tests/trainer/tf_make_dataset"
CHECK=(/usr/bin/python3 "$S/tests/trainer/check_report.py")
T="$(mktemp -d "${TMPDIR:-/tmp}/tf_report.XXXXXX")"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck source=../lib/expect.sh
source "$S/tests/lib/expect.sh"

"$MK" "$T/tr" 2000 16 16 1 4 1 > /dev/null || fail "fixture"
"$MK" "$T/va" 400 16 16 1 4 2 > /dev/null || fail "fixture"
run=(train --data "$T/tr" --val "$T/va" --width 8 --batch 50 --threads 2 --seed 3 --quiet)
# the report does not depend on the compute path: the reference layers train this tiny model in
# a fraction of a second (oneDNN primitives cost more to set up than these steps take)
export FASTLOAD_CPU_BACKEND=reference

case $MODE in
page)
    # 40 steps per epoch, a point every 7: 6 points per epoch (the epoch's last one included)
    expect_status 0 "train --report" -- "$TF" "${run[@]}" --epochs 3 --log "$T/a.jsonl" \
        --log-every 7 --report "$T/a.html" || exit 1
    [[ $(wc -l < "$T/a.jsonl") -eq 3 ]] || fail "log: want 3 lines (one per epoch)"
    /usr/bin/python3 - "$T/a.jsonl" <<'EOF' || fail "log fields"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for i, l in enumerate(lines):
    for k in ("epoch", "lr", "train_loss", "val_top1", "images_per_sec", "data_wait_fraction",
              "compute_seconds", "data_wait_seconds", "h2d_seconds", "eval_seconds",
              "checkpoint_seconds", "points"):
        assert k in l, (i, k)
    assert [round(p["x"], 6) for p in l["points"]] == [round(i + b / 40, 6) for b in (7, 14, 21, 28, 35, 40)], l["points"]
    assert [p["step"] for p in l["points"]] == [40 * i + b for b in (7, 14, 21, 28, 35, 40)]
    assert ("run" in l) == (i == 0)
assert lines[0]["run"]["model"] == "fastcnn" and lines[0]["run"]["batch"] == 50
assert lines[0]["run"]["epochs"] == 3
print("ok   log: 3 epoch lines, 6 points each at the right steps, the run's configuration once")
EOF
    "${CHECK[@]}" "$T/a.html" "$T/a.jsonl" || fail "train --report page"
    expect_status 0 "report" -- "$TF" report "$T/a.jsonl" -o "$T/r.html" \
        --title "trainfast: fastcnn on $T/tr" || exit 1
    cmp -s "$T/a.html" "$T/r.html" || fail "trainfast report of the log differs from train --report's page"
    echo "ok   trainfast report of the log is byte-identical to train --report's page"

    # the auto interval: about 50 points per epoch (40 batches: every batch)
    expect_status 0 "second run" -- "$TF" "${run[@]}" --epochs 2 --lr 0.05 --schedule cosine \
        --log "$T/b.jsonl" || exit 1
    n=$(/usr/bin/python3 -c "import json,sys; print(sum(len(json.loads(l)['points']) for l in open(sys.argv[1])))" "$T/b.jsonl")
    [[ $n -eq 80 ]] || fail "auto --log-every: $n points for 2 epochs of 40 batches, want 80"
    expect_status 0 "report of two logs" -- "$TF" report "$T/a.jsonl" "$T/b.jsonl" -o "$T/ab.html" || exit 1
    "${CHECK[@]}" "$T/ab.html" "$T/a.jsonl" "$T/b.jsonl" || fail "two-log page"
    grep -q 'data-run="1" data-series="val_top1"' "$T/ab.html" || fail "no second run's val_top1 series"
    [[ $(grep -o '<span class="key">' "$T/ab.html" | wc -l) -ge 10 ]] || fail "legends"
    grep -q '</svg>a val</span>' "$T/ab.html" && grep -q '</svg>b val</span>' "$T/ab.html" \
        || fail "the legend names both runs"
    echo "ok   two logs: two series per chart, both runs in the legends"

    # escaping: a file name and configuration values made of markup
    evil="$T/x<b>&'\"y.jsonl"
    sed -e '1s|"model":"fastcnn"|"model":"</td><script>alert(1)</script><img src=x onerror=alert(2)>"|' \
        "$T/a.jsonl" > "$evil"
    expect_status 0 "report of markup" -- "$TF" report "$evil" -o "$T/e.html" --title '<i>t</i>&' || exit 1
    "${CHECK[@]}" "$T/e.html" "$evil" || fail "escaped page"
    grep -qF '&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x' "$T/e.html" \
        || grep -qF '&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img' "$T/e.html" \
        || fail "configuration value not escaped"
    grep -qF 'x&lt;b&gt;&amp;&#39;&quot;y' "$T/e.html" || fail "run name not escaped"
    grep -qF '<title>&lt;i&gt;t&lt;/i&gt;&amp;</title>' "$T/e.html" || fail "title not escaped"
    echo "ok   strings from the log are escaped (name, configuration, title)"

    # a resumed run's report draws the whole --log file, the epochs before the resume included
    expect_status 0 "run with checkpoints" -- "$TF" "${run[@]}" --epochs 2 --checkpoint "$T/ck" \
        --log "$T/c.jsonl" || exit 1
    expect_status 0 "resumed run" -- "$TF" "${run[@]}" --epochs 2 --checkpoint "$T/ck" --resume \
        --log "$T/c.jsonl" --report "$T/c.html" || exit 1
    "${CHECK[@]}" "$T/c.html" "$T/c.jsonl" || fail "resumed run's page"
    grep -c 'data-series="val_top1"' "$T/c.html" | grep -qx 1 || fail "resumed page: val_top1 series"
    echo "ok   a resumed run's --report draws the epochs of its whole log"

    # a GPU run's NVML fields: the GPU utilisation and memory charts, mapped back like the others
    /usr/bin/python3 - "$T/a.jsonl" "$T/gpu.jsonl" <<'EOF'
import json, sys
with open(sys.argv[2], "w") as f:
    for i, l in enumerate(open(sys.argv[1])):
        d = json.loads(l)
        d.update(gpu_utilization=0.5 + 0.1 * i, gpu_memory_used_bytes=(3 + i) * 2**30,
                 gpu_memory_total_bytes=141 * 2**30, h2d_seconds=0.01 * (i + 1))
        f.write(json.dumps(d) + "\n")
EOF
    grep -q 'data-chart="gpu_util"' "$T/a.html" && fail "GPU charts drawn for a CPU run"
    expect_status 0 "report of a GPU log" -- "$TF" report "$T/gpu.jsonl" -o "$T/gpu.html" || exit 1
    "${CHECK[@]}" "$T/gpu.html" "$T/gpu.jsonl" || fail "GPU page"
    for c in gpu_util gpu_mem; do
        grep -q "data-chart=\"$c\"" "$T/gpu.html" || fail "no $c chart for a log with NVML fields"
    done
    echo "ok   NVML fields give the GPU utilisation and memory charts (none for a CPU run)"

    # a log written before the report's fields (the first 13 keys only) still draws
    /usr/bin/python3 - "$T/a.jsonl" "$T/old.jsonl" <<'EOF'
import json, sys
keep = ("epoch", "epochs", "steps", "lr", "train_loss", "train_acc", "val_loss", "val_top1",
        "images_per_sec", "data_wait_fraction", "epoch_seconds", "wall_seconds")
with open(sys.argv[2], "w") as f:
    for l in open(sys.argv[1]):
        d = json.loads(l)
        f.write(json.dumps({k: d[k] for k in keep}) + "\n")
EOF
    expect_status 0 "report of an old log" -- "$TF" report "$T/old.jsonl" -o "$T/old.html" || exit 1
    "${CHECK[@]}" "$T/old.html" "$T/old.jsonl" || fail "old log page"

    # malformed logs: FILE:LINE and the reason; exit 1; no page left behind
    { head -n 1 "$T/a.jsonl"; echo '{"epoch": 2, "val_top1": 0.5,'; } > "$T/bad1.jsonl"
    expect_status 1 "bad JSON" -- "$TF" report "$T/bad1.jsonl" -o "$T/bad.html"
    expect_err "bad1.jsonl:2:" "bad JSON names file:line" || exit 1
    printf '{"epoch":1,"val_top1":"high"}\n' > "$T/bad2.jsonl"
    expect_status 1 "string figure" -- "$TF" report "$T/bad2.jsonl" -o "$T/bad.html"
    expect_err 'bad2.jsonl:1: "val_top1" is not a number' "figure type" || exit 1
    printf '\n[1,2]\n' > "$T/bad3.jsonl"
    expect_status 1 "not an object" -- "$TF" report "$T/bad3.jsonl" -o "$T/bad.html"
    expect_err "bad3.jsonl:2: not a JSON object" "not an object" || exit 1
    printf '{"epoch":0}\n' > "$T/bad4.jsonl"
    expect_status 1 "epoch 0" -- "$TF" report "$T/bad4.jsonl" -o "$T/bad.html"
    expect_err 'bad4.jsonl:1: no "epoch" number' "epoch 0" || exit 1
    printf '{"epoch":1,"points":[{"x":0.5,"loss":[]}]}\n' > "$T/bad5.jsonl"
    expect_status 1 "bad point" -- "$TF" report "$T/bad5.jsonl" -o "$T/bad.html"
    expect_err 'bad5.jsonl:1: point 0: "loss" is not a number' "bad point" || exit 1
    [[ ! -e "$T/bad.html" ]] || fail "a page was written for a malformed log"
    { cat "$T/a.jsonl"; head -c 100 "$T/a.jsonl"; } > "$T/cut.jsonl"
    expect_status 0 "cut last line" -- "$TF" report "$T/cut.jsonl" -o "$T/cut.html" || exit 1
    expect_err "cut.jsonl: its last line is cut short" "cut line warning" || exit 1
    "${CHECK[@]}" "$T/cut.html" "$T/a.jsonl" || fail "page of the log with a cut line"
    echo "ok   malformed logs: file:line errors (exit 1), a cut last line skipped with a warning"

    expect_status 2 "no log" -- "$TF" report -o "$T/x.html"
    expect_status 1 "missing log" -- "$TF" report "$T/none.jsonl" -o "$T/x.html"
    expect_err "none.jsonl" "missing log named" || exit 1
    expect_status 1 "unwritable page" -- "$TF" report "$T/a.jsonl" -o "$T/no/such/dir/r.html"
    expect_err "no/such/dir/r.html" "unwritable page named" || exit 1
    expect_status 0 "stdout" -- "$TF" report "$T/a.jsonl" -o - || exit 1
    cmp -s "$T/out" "$T/r.html" || [[ $(head -c 15 "$T/out") == "<!DOCTYPE html>" ]] || fail "-o -"
    # --report without --log: from the lines kept in memory
    expect_status 0 "train --report alone" -- "$TF" "${run[@]}" --epochs 1 --report "$T/m.html" || exit 1
    grep -q 'data-series="val_top1"' "$T/m.html" || fail "train --report without --log"
    echo "ok   usage and write errors; train --report without --log"
    ;;
chromium)
    BR=$(command -v chromium || command -v chromium-browser) || { echo "SKIP: no chromium (apt-get install chromium)"; exit 77; }
    /usr/bin/python3 -c "import PIL" 2>/dev/null || { echo "SKIP: no python3-pil"; exit 77; }
    expect_status 0 "train --report" -- "$TF" "${run[@]}" --epochs 3 --log "$T/a.jsonl" || exit 1
    expect_status 0 "second run" -- "$TF" "${run[@]}" --epochs 3 --lr 0.05 --log "$T/b.jsonl" || exit 1
    expect_status 0 "report" -- "$TF" report "$T/a.jsonl" "$T/b.jsonl" -o "$T/r.html" || exit 1
    for size in 1200,1600 420,2400; do
        rm -f "$T/shot.png"
        timeout 120 "$BR" --headless --no-sandbox --disable-gpu --hide-scrollbars \
            --user-data-dir="$T/profile" --screenshot="$T/shot.png" --window-size=$size \
            "file://$T/r.html" > "$T/chromium.log" 2>&1
        [[ -s "$T/shot.png" ]] || { tail -5 "$T/chromium.log"; fail "chromium wrote no screenshot at $size"; }
        "${CHECK[@]}" --png "$T/shot.png" || fail "screenshot at $size"
    done
    echo "ok   headless Chromium: the page is drawn, wide and narrow"
    ;;
*) fail "unknown mode $MODE" ;;
esac
echo "PASS"
