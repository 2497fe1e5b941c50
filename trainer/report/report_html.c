/* report_html.c — the HTML report of one or more training logs (report_log.h): one
 * self-contained page (inline CSS and SVG, no script, nothing fetched) with the final figures,
 * the charts (loss, top-1, learning rate, images/s, data wait, where the time went, GPU
 * utilisation and memory when logged) and the runs' configuration. Several logs share each chart,
 * one colour per run. Every string that comes from a log is HTML-escaped. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fl_file.h"
#include "report_log.h"
#include "report_svg.h"

void tf_html_escape(fl_tbuf *out, const char *s)
{
    const char *run = s;
    for (; *s; s++) {
        const char *e = *s == '&'    ? "&amp;"
                        : *s == '<'  ? "&lt;"
                        : *s == '>'  ? "&gt;"
                        : *s == '"'  ? "&quot;"
                        : *s == '\'' ? "&#39;"
                                     : NULL;
        if (!e)
            continue;
        fl_tbuf_append(out, run, (size_t)(s - run));
        fl_tbuf_puts(out, e);
        run = s + 1;
    }
    fl_tbuf_append(out, run, (size_t)(s - run));
}

static const char CSS[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;"
    "margin:0;padding:16px;color:#222;background:#f6f7f9}"
    "h1{font-size:22px;margin:0 0 2px}h2{font-size:15px;margin:0 0 2px}"
    ".sub{color:#555;margin:0 0 14px}.note{color:#666;font-size:12px;margin:4px 0 0}"
    ".grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,470px),1fr));"
    "gap:14px;margin:14px 0}"
    ".card{background:#fff;border:1px solid #dcdfe4;border-radius:6px;padding:10px 12px;"
    "min-width:0}"
    "svg.chart{width:100%;height:auto;display:block;font-family:inherit}"
    "svg.chart circle:hover{stroke:#000;stroke-width:1.5}"
    ".legend{display:flex;flex-wrap:wrap;gap:2px 14px;font-size:12px;color:#333;margin:2px 0 4px}"
    ".key{display:inline-flex;align-items:center;gap:5px}"
    ".swatch{display:inline-block;width:12px;height:12px;border-radius:2px}"
    ".wrap{overflow-x:auto}table{border-collapse:collapse;font-size:13px;background:#fff}"
    "th,td{padding:4px 10px;border-bottom:1px solid #e6e8eb;text-align:right;white-space:nowrap}"
    "th{background:#eef0f3}th:first-child,td:first-child{text-align:left}"
    "td.text{text-align:left;white-space:normal;word-break:break-all;min-width:8em}";

/* a figure of a table cell ("-" when not logged) */
static void cell(fl_tbuf *b, double v, const char *fmt, double scale)
{
    if (isfinite(v))
        fl_tbuf_printf(b, fmt, v * scale);
    else
        fl_tbuf_puts(b, "<td>-</td>");
}

/* sum of a per-epoch figure over a run (NaN when no epoch has it) */
static double sum_of(const tf_log *g, int k)
{
    double s = 0;
    int any = 0;
    for (size_t i = 0; i < g->n_ep; i++)
        if (isfinite(g->ep[i][k]) && fabs(g->ep[i][k]) < 1e15)
            s += g->ep[i][k], any = 1;
    return any ? s : NAN;
}

static void run_name_cell(fl_tbuf *b, const tf_log *g, int color)
{
    fl_tbuf_printf(b,
                   "<tr><td><span class=\"key\"><span class=\"swatch\" style=\"background:%s\">"
                   "</span>",
                   tf_svg_color(color));
    tf_html_escape(b, g->name);
    fl_tbuf_puts(b, "</span></td>");
}

/* how a run split its cores between decoding and compute: the CPU seconds of the loader's
 * threads and of the rest over the cores' time while training, summed over the epochs that
 * logged them ("-" for a log without them) */
static void cores_cell(fl_tbuf *b, const tf_log *g)
{
    const double *last = g->n_ep ? g->ep[g->n_ep - 1] : NULL;
    double dec = 0, cpu = 0, core_s = 0, workers = 0;
    size_t n = 0;
    for (size_t i = 0; i < g->n_ep; i++) {
        const double *e = g->ep[i];
        if (!(isfinite(e[TF_E_CORES]) && e[TF_E_CORES] >= 1 && e[TF_E_CORES] < 1e6 &&
              isfinite(e[TF_E_DECODE_CPU_S]) && isfinite(e[TF_E_CPU_S]) &&
              isfinite(e[TF_E_TRAIN_WALL_S]) && isfinite(e[TF_E_DECODE_WORKERS]) &&
              fabs(e[TF_E_CPU_S]) < 1e15 && fabs(e[TF_E_TRAIN_WALL_S]) < 1e15))
            continue;
        dec += e[TF_E_DECODE_CPU_S], cpu += e[TF_E_CPU_S];
        core_s += e[TF_E_TRAIN_WALL_S] * e[TF_E_CORES];
        workers += e[TF_E_DECODE_WORKERS], n++;
    }
    if (!n || !(core_s > 0)) {
        fl_tbuf_puts(b, "<td>-</td>");
        return;
    }
    char thr[48] = "compute on the GPU";
    if (isfinite(last[TF_E_THREADS]) && last[TF_E_THREADS] >= 1)
        snprintf(thr, sizeof thr, "compute %.0f threads", last[TF_E_THREADS]);
    fl_tbuf_printf(b, "<td>%.0f: decode %.1f workers %.0f %%, %s %.0f %%</td>", last[TF_E_CORES],
                   workers / (double)n, 100 * dec / core_s, thr,
                   cpu > dec ? 100 * (cpu - dec) / core_s : 0);
}

/* the final figures: one row per run */
static void summary_table(fl_tbuf *b, const tf_log *logs, size_t n)
{
    fl_tbuf_puts(b, "<div class=\"card\"><h2>Final figures</h2><div class=\"wrap\"><table><tr>"
                    "<th>run</th><th>epochs</th><th>val top-1</th><th>best val top-1</th>"
                    "<th>val top-5</th><th>val loss</th><th>train loss</th><th>images/s</th>"
                    "<th>data wait</th><th>cores: decode / compute</th><th>wall time</th></tr>");
    for (size_t r = 0; r < n; r++) {
        const tf_log *g = &logs[r];
        const double *last = g->n_ep ? g->ep[g->n_ep - 1] : NULL;
        double best = NAN, best_ep = NAN, ips = 0;
        size_t nips = 0;
        for (size_t i = 0; i < g->n_ep; i++) {
            if (isfinite(g->ep[i][TF_E_VAL_TOP1]) && !(g->ep[i][TF_E_VAL_TOP1] <= best))
                best = g->ep[i][TF_E_VAL_TOP1], best_ep = g->ep[i][TF_E_EPOCH];
            if (isfinite(g->ep[i][TF_E_IPS]))
                ips += g->ep[i][TF_E_IPS], nips++;
        }
        /* the run's share of step time waiting for data: from the seconds when logged */
        double wait = sum_of(g, TF_E_WAIT_S), h2d = sum_of(g, TF_E_H2D_S);
        double busy = wait + sum_of(g, TF_E_COMPUTE_S) + (isfinite(h2d) ? h2d : 0);
        double wf = isfinite(busy) && busy > 0 ? wait / busy : last ? last[TF_E_WAIT_FRAC] : NAN;
        run_name_cell(b, g, (int)r);
        fl_tbuf_printf(b, "<td>%zu</td>", g->n_ep);
        cell(b, last ? last[TF_E_VAL_TOP1] : NAN, "<td>%.2f %%</td>", 100);
        if (isfinite(best))
            fl_tbuf_printf(b, "<td>%.2f %% (epoch %.0f)</td>", 100 * best, best_ep);
        else
            fl_tbuf_puts(b, "<td>-</td>");
        cell(b, last ? last[TF_E_VAL_TOP5] : NAN, "<td>%.2f %%</td>", 100);
        cell(b, last ? last[TF_E_VAL_LOSS] : NAN, "<td>%.4f</td>", 1);
        cell(b, last ? last[TF_E_TRAIN_LOSS] : NAN, "<td>%.4f</td>", 1);
        cell(b, nips ? ips / (double)nips : NAN, "<td>%.0f</td>", 1);
        cell(b, wf, "<td>%.1f %%</td>", 100);
        cores_cell(b, g);
        cell(b, last ? last[TF_E_WALL_S] : NAN, "<td>%.1f s</td>", 1);
        fl_tbuf_puts(b, "</tr>");
    }
    fl_tbuf_puts(b, "</table></div><p class=\"note\">images/s: the mean of the epochs' figures "
                    "(training steps only, all processes); data wait: the share of the step time "
                    "spent waiting for the loader; cores: this process's cores, the decode workers "
                    "at work (mean) and the compute threads, with the share of the cores' time "
                    "the loader's threads and the rest of the process used while training (CPU "
                    "seconds); wall time: since the run started, evaluation and checkpoints "
                    "included.</p></div>");
}

/* what one chart plots: up to three per-epoch figures and one per-N-steps figure */
typedef struct chart_spec {
    const char *id, *title, *ylabel, *unit;
    int from_zero;
    double cap, scale;
    int ek[3]; /* TF_E_* or -1 */
    const char *elabel[3];
    int pk;                    /* TF_P_* or -1 */
    const char *plabel, *pkey; /* pkey: data-series of the points ("points.lr") */
} chart_spec;

static const chart_spec CHARTS[] = {
    {"loss",
     "Loss",
     "loss (cross-entropy, label smoothing included)",
     "",
     0,
     NAN,
     1,
     {TF_E_TRAIN_LOSS, TF_E_VAL_LOSS, -1},
     {"train", "val", NULL},
     TF_P_LOSS,
     "train, every N steps",
     "points.loss"},
    {"top1",
     "Accuracy",
     "top-1 accuracy (%)",
     "%",
     0,
     100,
     100,
     {TF_E_TRAIN_ACC, TF_E_VAL_TOP1, TF_E_VAL_TOP5},
     {"train", "val top-1", "val top-5"},
     TF_P_ACC,
     "train, every N steps",
     "points.acc"},
    {"lr",
     "Learning rate",
     "learning rate",
     "",
     1,
     NAN,
     1,
     {TF_E_LR, -1, -1},
     {"at epoch end", NULL, NULL},
     TF_P_LR,
     "every N steps",
     "points.lr"},
    {"ips",
     "Throughput",
     "images/s (training steps)",
     "img/s",
     1,
     NAN,
     1,
     {TF_E_IPS, -1, -1},
     {"epoch", NULL, NULL},
     TF_P_IPS,
     "every N steps",
     "points.images_per_sec"},
    {"wait",
     "Waiting for data",
     "data wait (% of step time)",
     "%",
     1,
     100,
     100,
     {TF_E_WAIT_FRAC, -1, -1},
     {"epoch", NULL, NULL},
     TF_P_WAIT_FRAC,
     "every N steps",
     "points.data_wait_fraction"},
    {"gpu_util",
     "GPU utilisation",
     "GPU utilisation (%, NVML)",
     "%",
     1,
     100,
     100,
     {TF_E_GPU_UTIL, -1, -1},
     {"epoch mean", NULL, NULL},
     -1,
     NULL,
     NULL},
    {"gpu_mem",
     "GPU memory",
     "GPU memory used (GiB, NVML)",
     "GiB",
     1,
     NAN,
     1.0 / 1073741824.0,
     {TF_E_GPU_MEM, -1, -1},
     {"epoch max", NULL, NULL},
     -1,
     NULL,
     NULL},
};

static int logged(const tf_log *logs, size_t n, int ek)
{
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < logs[r].n_ep; i++)
            if (isfinite(logs[r].ep[i][ek]))
                return 1;
    return 0;
}

/* one chart card: its series over all runs, the legend, the SVG */
static void chart_card(fl_tbuf *b, const chart_spec *cs, const tf_log *logs, size_t n, tf_series *s)
{
    size_t ns = 0;
    const int styles[3] = {TF_LINE_SOLID, TF_LINE_DASHED, TF_LINE_DOTTED};
    for (size_t r = 0; r < n; r++) {
        const tf_log *g = &logs[r];
        /* one run: a colour per figure (the points share the first figure's, thinner);
         * several: a colour per run, the figures told apart by their dashes */
        if (cs->pk >= 0 && g->n_pt)
            s[ns++] = (tf_series){.key = cs->pkey,
                                  .label = cs->plabel,
                                  .run = g->name,
                                  .run_index = (int)r,
                                  .color = n > 1 ? (int)r : 0,
                                  .style = TF_LINE_THIN,
                                  .x = &g->pt[0][TF_P_X],
                                  .y = &g->pt[0][cs->pk],
                                  .n = g->n_pt,
                                  .stride = TF_P_COUNT,
                                  .scale = cs->scale};
        for (int k = 0; k < 3; k++) {
            if (cs->ek[k] < 0 || !g->n_ep || !logged(g, 1, cs->ek[k]))
                continue;
            s[ns++] = (tf_series){.key = tf_log_epoch_key(cs->ek[k]),
                                  .label = cs->elabel[k],
                                  .run = g->name,
                                  .run_index = (int)r,
                                  .color = n > 1 ? (int)r : k,
                                  .style = styles[k],
                                  .markers = 1,
                                  .x = &g->ep[0][TF_E_EPOCH],
                                  .y = &g->ep[0][cs->ek[k]],
                                  .n = g->n_ep,
                                  .stride = TF_E_COUNT,
                                  .scale = cs->scale};
        }
    }
    tf_chart c = {.id = cs->id,
                  .ylabel = cs->ylabel,
                  .xlabel = "epoch",
                  .unit = cs->unit,
                  .y_from_zero = cs->from_zero,
                  .y_cap = cs->cap,
                  .s = s,
                  .ns = ns};
    fl_tbuf_printf(b, "<div class=\"card\"><h2>%s</h2>", cs->title);
    tf_svg_legend(b, s, ns, n > 1);
    tf_svg_chart(b, &c);
    fl_tbuf_puts(b, "</div>");
}

/* where the time went: the per-epoch step-time split summed over each run */
static void split_card(fl_tbuf *b, const tf_log *logs, size_t n)
{
    static const char *const names[] = {"compute",    "host-to-device", "data wait",
                                        "evaluation", "checkpoints",    "other"};
    static const int keys[] = {TF_E_COMPUTE_S, TF_E_H2D_S, TF_E_WAIT_S, TF_E_EVAL_S, TF_E_CKPT_S};
    double *part = calloc(n * 6, sizeof *part);
    const char **runs = calloc(n, sizeof *runs);
    if (!part || !runs) {
        b->failed = 1;
        goto out;
    }
    for (size_t r = 0; r < n; r++) {
        double known = 0, epoch_s = sum_of(&logs[r], TF_E_EPOCH_S);
        for (int k = 0; k < 5; k++) {
            double v = sum_of(&logs[r], keys[k]);
            part[r * 6 + k] = isfinite(v) && v > 0 ? v : 0;
            known += part[r * 6 + k];
        }
        part[r * 6 + 5] = isfinite(epoch_s) && epoch_s > known ? epoch_s - known : 0;
        runs[r] = logs[r].name;
    }
    fl_tbuf_puts(b, "<div class=\"card\"><h2>Where the time went</h2>");
    tf_svg_split(b, runs, n, names, part, 6);
    fl_tbuf_puts(b, "<p class=\"note\">Seconds summed over the logged epochs: the training "
                    "steps' compute, host-to-device copies and waiting for data, then evaluation, "
                    "checkpoints and the rest of each epoch's wall time.</p></div>");
out:
    free(part);
    free(runs);
}

/* the runs' configuration: one row per key any run logged, one column per run */
static void config_table(fl_tbuf *b, const tf_log *logs, size_t n)
{
    fl_tbuf_puts(b, "<div class=\"card\"><h2>Configuration</h2><div class=\"wrap\"><table><tr>"
                    "<th>option</th>");
    for (size_t r = 0; r < n; r++) {
        fl_tbuf_puts(b, "<th>");
        tf_html_escape(b, logs[r].name);
        fl_tbuf_puts(b, "</th>");
    }
    fl_tbuf_puts(b, "</tr>");
    for (size_t r = 0; r < n; r++)
        for (size_t k = 0; k < logs[r].n_cfg; k++) {
            const char *key = logs[r].cfg[k].key;
            int seen = 0; /* listed with an earlier run */
            for (size_t q = 0; q < r && !seen; q++)
                for (size_t j = 0; j < logs[q].n_cfg && !seen; j++)
                    seen = !strcmp(logs[q].cfg[j].key, key);
            if (seen)
                continue;
            fl_tbuf_puts(b, "<tr><td>");
            tf_html_escape(b, key);
            fl_tbuf_puts(b, "</td>");
            for (size_t q = 0; q < n; q++) {
                const char *v = "-";
                for (size_t j = 0; j < logs[q].n_cfg; j++)
                    if (!strcmp(logs[q].cfg[j].key, key))
                        v = logs[q].cfg[j].value;
                fl_tbuf_puts(b, "<td class=\"text\">");
                tf_html_escape(b, v);
                fl_tbuf_puts(b, "</td>");
            }
            fl_tbuf_puts(b, "</tr>");
        }
    fl_tbuf_puts(b, "</table></div></div>");
}

void tf_report_html(const tf_log *logs, size_t n, const char *title, fl_tbuf *b)
{
    tf_series *s = calloc(n * 4 + 1, sizeof *s); /* a chart: up to 4 series per run */
    if (!s) {
        b->failed = 1;
        return;
    }
    fl_tbuf_puts(b,
                 "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>");
    tf_html_escape(b, title);
    fl_tbuf_printf(b, "</title><style>%s</style></head>\n<body><h1>", CSS);
    tf_html_escape(b, title);
    fl_tbuf_printf(b, "</h1><p class=\"sub\">%zu run%s: ", n, n == 1 ? "" : "s");
    for (size_t r = 0; r < n; r++) {
        fl_tbuf_puts(b, r ? ", " : "");
        tf_html_escape(b, logs[r].name);
    }
    fl_tbuf_puts(b, ". Hover a point for its value.</p>\n");
    summary_table(b, logs, n);
    fl_tbuf_puts(b, "\n<div class=\"grid\">");
    for (size_t k = 0; k < sizeof CHARTS / sizeof CHARTS[0]; k++) {
        /* GPU charts only when a run logged them */
        if (CHARTS[k].pk < 0 && !logged(logs, n, CHARTS[k].ek[0]))
            continue;
        chart_card(b, &CHARTS[k], logs, n, s);
        fl_tbuf_puts(b, "\n");
    }
    split_card(b, logs, n);
    fl_tbuf_puts(b, "</div>\n");
    config_table(b, logs, n);
    fl_tbuf_puts(b, "\n<p class=\"note\">Drawn by trainfast report from the JSONL log of "
                    "trainfast train --log (docs/REPORT.md).</p></body></html>\n");
    free(s);
}

static int write_fd(int fd, const fl_tbuf *b) { return fl_write_all(fd, b->data, b->len); }

int tf_report_write(const tf_log *logs, size_t n, const char *title, const char *path,
                    fl_error *err)
{
    fl_tbuf b = {0};
    tf_report_html(logs, n, title, &b);
    if (b.failed) {
        fl_tbuf_free(&b);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    }
    int rc = 0;
    if (!strcmp(path, "-")) {
        if ((rc = write_fd(STDOUT_FILENO, &b)))
            fl_error_set(err, rc, "stdout: %s", strerror(-rc));
        fl_tbuf_free(&b);
        return rc;
    }
    /* fl_file_replace: a reader never sees half a page; a device or FIFO is written in place */
    fl_write_step step;
    if ((rc = fl_file_replace(path, b.data, b.len, 0666, &step)))
        fl_error_set(err, rc, "%s: cannot %s: %s", path,
                     step == FL_WRITE_NOT_FILE ? "write a report over a directory"
                                               : fl_write_step_name(step),
                     strerror(-rc));
    fl_tbuf_free(&b);
    return rc;
}
