#!/usr/bin/python3
"""check_report.py — checks a `trainfast report` page against the logs it was drawn from.

usage: check_report.py REPORT.html LOG.jsonl [LOG2.jsonl ...]   (logs in the report's run order)
       check_report.py --png SHOT.png                              (a screenshot is not blank)

Parses the HTML with the standard library: every chart's <svg> gives its mapping (data-xmin/xmax/
ymin/ymax and the plot box), every <polyline data-run data-series> its points; each point mapped
back must equal the logged value (x: the epoch or the point's x; y: the figure times the chart's
scale), tolerance 1e-4 of the axis span (points are written with 2 decimals on a ~550 px box).
Also: one polyline per run and logged figure, each with as many points as finite values were
logged; no <script>, no URL, no element the logs' strings could have injected. Exit 0 / 1."""
import json
import math
import sys
from html.parser import HTMLParser

# data-chart -> scale of y (the report draws fractions as percent, bytes as GiB)
SCALE = {"loss": 1, "top1": 100, "lr": 1, "ips": 1, "wait": 100, "gpu_util": 100,
         "gpu_mem": 1 / 1073741824}
# data-series: a key of the log line, or "points.KEY": KEY of its "points"
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div", "span",
                "table", "tr", "th", "td", "svg", "g", "line", "text", "polyline", "circle", "rect"}


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.charts, self.tags, self.chart = [], set(), None
        self.attrs = set()
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        self.attrs |= set(a)
        if tag == "svg" and "data-xmin" in a:
            self.chart = {"id": a["data-chart"], "a": a, "lines": []}
            self.charts.append(self.chart)
        elif tag == "polyline" and self.chart is not None:
            self.chart["lines"].append(a)

    def handle_endtag(self, tag):
        if tag == "svg":  # legend SVGs sit outside the charts, and no chart nests an SVG
            self.chart = None

    def handle_data(self, data):
        self.text.append(data)


def load(path):
    lines = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    return lines


def expected(log, series, scale):
    """(x, y) pairs the report should draw for one run's series"""
    out = []
    if series.startswith("points."):
        key = series[len("points."):]
        for line in log:
            for p in line.get("points") or []:
                v = p.get(key)
                if isinstance(v, (int, float)) and math.isfinite(v):
                    out.append((p["x"], v * scale))
    else:
        for line in log:
            v = line.get(series)
            if isinstance(v, (int, float)) and math.isfinite(v):
                out.append((line["epoch"], v * scale))
    return out


def check_chart(c, logs, fail):
    a = {k: float(v) for k, v in c["a"].items() if k.startswith("data-") and k != "data-chart"}
    xs, ys = a["data-xmax"] - a["data-xmin"], a["data-ymax"] - a["data-ymin"]
    scale = SCALE[c["id"]]
    drawn = 0
    for pl in c["lines"]:
        run, series = int(pl["data-run"]), pl["data-series"]
        pts = [tuple(map(float, p.split(","))) for p in pl["points"].split()]
        want = expected(logs[run], series, scale)
        if len(pts) != len(want):
            fail(f"chart {c['id']} run {run} {series}: {len(pts)} points drawn, {len(want)} logged")
            continue
        for (px, py), (wx, wy) in zip(pts, want):
            x = a["data-xmin"] + (px - a["data-left"]) / (a["data-right"] - a["data-left"]) * xs
            y = a["data-ymin"] + (a["data-bottom"] - py) / (a["data-bottom"] - a["data-top"]) * ys
            if abs(x - wx) > 1e-4 * xs or abs(y - wy) > 1e-4 * ys:
                fail(f"chart {c['id']} run {run} {series}: drawn ({x:.6g}, {y:.6g}), "
                     f"logged ({wx:.6g}, {wy:.6g})")
                return drawn
            drawn += 1
    return drawn


def check_html(path, log_paths):
    failures = []
    fail = failures.append
    html = open(path, encoding="utf-8").read()
    page = Page()
    page.feed(html)
    logs = [load(p) for p in log_paths]
    if page.tags - ALLOWED_TAGS:
        fail(f"unexpected elements {sorted(page.tags - ALLOWED_TAGS)}")
    bad_attrs = {a for a in page.attrs if a in ("src", "href") or a.startswith("on")}
    if bad_attrs:
        fail(f"attributes {sorted(bad_attrs)}: the page must fetch and run nothing")
    low = html.lower()
    for bad in ("http:", "https:", "@import", "url("):
        if bad in low:
            fail(f"the page holds {bad!r}: not self-contained")
    total = 0
    runs_seen = set()
    for c in page.charts:
        total += check_chart(c, logs, fail)
        runs_seen |= {int(pl["data-run"]) for pl in c["lines"]}
    # every run with a logged figure has its polyline in the chart of that figure
    for cid, key in (("loss", "train_loss"), ("loss", "val_loss"), ("top1", "val_top1"),
                     ("lr", "lr"), ("ips", "images_per_sec"), ("wait", "data_wait_fraction")):
        chart = [c for c in page.charts if c["id"] == cid]
        for r, log in enumerate(logs):
            if expected(log, key, 1) and not any(
                    int(pl["data-run"]) == r and pl["data-series"] == key
                    for c in chart for pl in c["lines"]):
                fail(f"chart {cid}: no {key} series for run {r}")
    if runs_seen != set(range(len(logs))):
        fail(f"series drawn for runs {sorted(runs_seen)}, expected {list(range(len(logs)))}")
    for f in failures[:20]:
        print("FAIL:", f)
    if not failures:
        print(f"ok   {path}: {len(page.charts)} charts, {total} points mapped back to the "
              f"{len(logs)} log(s)")
    return 1 if failures else 0


def check_png(path):
    from PIL import Image
    im = Image.open(path).convert("RGB")
    w, h = im.size
    small = im.resize((w // 2, h // 2))
    px = list(small.getdata())
    colours = len(set(px))
    non_bg = sum(1 for p in px if max(p) - min(p) > 40 or sum(p) < 600) / len(px)
    # the palette's first colours (runs / figures) must be on screen
    palette = [(0x4e, 0x79, 0xa7), (0xe1, 0x57, 0x59), (0x59, 0xa1, 0x4f)]
    found = [any(sum(abs(a - b) for a, b in zip(p, c)) < 30 for p in px) for c in palette]
    print(f"{path}: {w}x{h}, {colours} colours, {100 * non_bg:.1f}% drawn (not background), "
          f"palette colours found {found}")
    if colours < 50 or non_bg < 0.02 or not all(found):
        print("FAIL: the screenshot looks blank or lacks the charts' colours")
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--png":
        sys.exit(check_png(sys.argv[2]))
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    sys.exit(check_html(sys.argv[1], sys.argv[2:]))
