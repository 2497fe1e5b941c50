/* report_svg.c — the report's charts drawn as inline SVG text (report_svg.h): "nice" axis ticks
 * (1, 2, 5 x 10^k), a light grid, axis labels with units, one polyline per series with optional
 * markers whose <title> is the tooltip (hover works without JavaScript), and the stacked bar of
 * the step-time split. The SVG scales with its container (viewBox, width 100%). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report_log.h"
#include "report_svg.h"

/* the plot box inside the viewBox (0 0 W H) */
#define W 640.0
#define H 330.0
#define L 70.0
#define R 624.0
#define T 16.0
#define B 280.0

static const char *const PALETTE[] = {"#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1",
                                      "#76b7b2", "#9c755f", "#d4a11e", "#ff9da7", "#6b6b6b"};

const char *tf_svg_color(int i)
{
    const int n = (int)(sizeof PALETTE / sizeof PALETTE[0]);
    return PALETTE[((i % n) + n) % n];
}

void tf_svg_number(char *out, size_t cap, double v)
{
    double a = fabs(v);
    if (!isfinite(v))
        snprintf(out, cap, "-");
    else if (a >= 1e6)
        snprintf(out, cap, "%.3gM", v / 1e6);
    else if (a >= 1e4)
        snprintf(out, cap, "%.3gk", v / 1e3);
    else
        snprintf(out, cap, "%.3g", v);
}

/* a tick label: as many decimals as the step needs */
static void tick_label(char *out, size_t cap, double v, double step)
{
    if (fabs(v) < step * 1e-6)
        v = 0;
    if (fabs(v) >= 1e4 || step >= 1e4) {
        tf_svg_number(out, cap, v);
        return;
    }
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 8) {
        snprintf(out, cap, "%.2g", v);
        return;
    }
    snprintf(out, cap, "%.*f", dec, v);
}

/* a step of 1, 2 or 5 x 10^k giving about `want` intervals over span */
static double nice_step(double span, int want)
{
    double raw = span / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* a value a chart draws: finite and not absurd (a log is untrusted; 1e300 would break the axes) */
static int drawable(double v) { return isfinite(v) && fabs(v) < 1e15; }

/* the axis range [*lo, *hi] widened to whole steps; returns the step, *nt the intervals */
static double axis_range(double *lo, double *hi, int want, int *nt)
{
    if (!(*hi > *lo)) {
        double d = fabs(*lo) > 1e-9 ? fabs(*lo) * 0.1 : 1;
        *lo -= d;
        *hi += d;
    }
    double step = nice_step(*hi - *lo, want);
    double l = floor(*lo / step + 1e-9) * step, h = ceil(*hi / step - 1e-9) * step;
    double n = (h - l) / step;
    if (step > 0 && h > l && n >= 1 && n <= 100) {
        *lo = l, *hi = h;
        *nt = (int)lround(n);
        return step;
    }
    /* a span too small for the values' precision: ticks without rounding */
    if (!(*hi - *lo > 0))
        *hi = *lo + 1;
    *nt = want;
    return (*hi - *lo) / want;
}

static void data_range(const tf_chart *c, double *xlo, double *xhi, double *ylo, double *yhi)
{
    *xlo = INFINITY, *xhi = -INFINITY, *ylo = INFINITY, *yhi = -INFINITY;
    for (size_t k = 0; k < c->ns; k++) {
        const tf_series *s = &c->s[k];
        for (size_t i = 0; i < s->n; i++) {
            double x = s->x[i * s->stride], y = s->y[i * s->stride] * s->scale;
            if (!drawable(x) || !drawable(y))
                continue;
            *xlo = fmin(*xlo, x), *xhi = fmax(*xhi, x);
            *ylo = fmin(*ylo, y), *yhi = fmax(*yhi, y);
        }
    }
}

static const char *dash(int style)
{
    return style == TF_LINE_DASHED   ? " stroke-dasharray=\"7 4\""
           : style == TF_LINE_DOTTED ? " stroke-dasharray=\"2 3\""
                                     : "";
}

/* the grid, ticks and axis labels */
static void axes(fl_tbuf *b, const tf_chart *c, double xlo, double xhi, double xs, int xn,
                 double ylo, double yhi, double ys, int yn)
{
    char lab[48];
    fl_tbuf_puts(b, "<g class=\"grid\" stroke=\"#e3e3e3\" stroke-width=\"1\">");
    for (int i = 0; i <= yn; i++) {
        double v = ylo + i * ys, py = B - (v - ylo) / (yhi - ylo) * (B - T);
        fl_tbuf_printf(b, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\"/>", L, py, R, py);
    }
    for (int i = 0; i <= xn; i++) {
        double v = xlo + i * xs, px = L + (v - xlo) / (xhi - xlo) * (R - L);
        fl_tbuf_printf(b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>", px, T, px, B);
    }
    fl_tbuf_printf(b,
                   "</g><g stroke=\"#777\" stroke-width=\"1\"><line x1=\"%.1f\" y1=\"%.1f\" "
                   "x2=\"%.1f\" y2=\"%.1f\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                   "y2=\"%.1f\"/></g>",
                   L, B, R, B, L, T, L, B);
    fl_tbuf_puts(b, "<g class=\"ticks\" font-size=\"12\" fill=\"#444\">");
    for (int i = 0; i <= yn; i++) {
        double v = ylo + i * ys;
        tick_label(lab, sizeof lab, v, ys);
        fl_tbuf_printf(b, "<text x=\"%.1f\" y=\"%.2f\" text-anchor=\"end\">%s</text>", L - 6,
                       B - (v - ylo) / (yhi - ylo) * (B - T) + 4, lab);
    }
    for (int i = 0; i <= xn; i++) {
        double v = xlo + i * xs;
        tick_label(lab, sizeof lab, v, xs);
        fl_tbuf_printf(b, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>",
                       L + (v - xlo) / (xhi - xlo) * (R - L), B + 17, lab);
    }
    fl_tbuf_printf(b,
                   "</g><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\" "
                   "fill=\"#222\">",
                   (L + R) / 2, H - 10);
    tf_html_escape(b, c->xlabel);
    fl_tbuf_printf(b,
                   "</text><text transform=\"translate(16 %.1f) rotate(-90)\" "
                   "text-anchor=\"middle\" font-size=\"13\" fill=\"#222\">",
                   (T + B) / 2);
    tf_html_escape(b, c->ylabel);
    fl_tbuf_puts(b, "</text>");
}

/* one series: its polyline, then its markers with tooltips */
static void series(fl_tbuf *b, const tf_chart *c, const tf_series *s, double xlo, double xhi,
                   double ylo, double yhi)
{
    const char *col = tf_svg_color(s->color);
    fl_tbuf_printf(b, "<polyline class=\"series\" data-run=\"%d\" data-series=\"", s->run_index);
    tf_html_escape(b, s->key);
    fl_tbuf_printf(b,
                   "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s%s "
                   "stroke-linejoin=\"round\" points=\"",
                   col, s->style == TF_LINE_THIN ? "1.2" : "2.2", dash(s->style),
                   s->style == TF_LINE_THIN ? " stroke-opacity=\"0.55\"" : "");
    for (size_t i = 0, first = 1; i < s->n; i++) {
        double x = s->x[i * s->stride], y = s->y[i * s->stride] * s->scale;
        if (!drawable(x) || !drawable(y))
            continue;
        fl_tbuf_printf(b, "%s%.2f,%.2f", first ? "" : " ", L + (x - xlo) / (xhi - xlo) * (R - L),
                       B - (y - ylo) / (yhi - ylo) * (B - T));
        first = 0;
    }
    fl_tbuf_puts(b, "\"/>");
    if (!s->markers)
        return;
    for (size_t i = 0; i < s->n; i++) {
        double x = s->x[i * s->stride], y = s->y[i * s->stride] * s->scale;
        char xv[32], yv[32];
        if (!drawable(x) || !drawable(y))
            continue;
        tf_svg_number(xv, sizeof xv, x);
        snprintf(yv, sizeof yv, "%.4g", y);
        fl_tbuf_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3.2\" fill=\"%s\"><title>",
                       L + (x - xlo) / (xhi - xlo) * (R - L), B - (y - ylo) / (yhi - ylo) * (B - T),
                       col);
        tf_html_escape(b, s->run);
        fl_tbuf_puts(b, ": ");
        tf_html_escape(b, s->label);
        fl_tbuf_printf(b, " %s %s at epoch %s</title></circle>", yv, c->unit, xv);
    }
}

void tf_svg_chart(fl_tbuf *b, const tf_chart *c)
{
    double xlo, xhi, ylo, yhi;
    data_range(c, &xlo, &xhi, &ylo, &yhi);
    const int empty = !isfinite(xlo);
    if (empty)
        xlo = 0, xhi = 1, ylo = 0, yhi = 1;
    xlo = fmin(xlo, 0); /* epochs from the start of training */
    if (c->y_from_zero)
        ylo = fmin(ylo, 0);
    if (isfinite(c->y_cap) && yhi <= c->y_cap && ylo >= 0 && yhi > 0.5 * c->y_cap)
        yhi = c->y_cap;
    int xn, yn;
    double xs = axis_range(&xlo, &xhi, xhi - xlo >= 4 ? 8 : 5, &xn);
    if (xs < 1 && xhi - xlo >= 2 && xhi - xlo <= 100 && xhi == floor(xhi) && xlo == floor(xlo)) {
        xs = 1; /* whole epochs on the axis */
        xn = (int)(xhi - xlo);
    }
    double ys = axis_range(&ylo, &yhi, 5, &yn);
    fl_tbuf_printf(b,
                   "<svg class=\"chart\" data-chart=\"%s\" viewBox=\"0 0 %.0f %.0f\" "
                   "role=\"img\" data-xmin=\"%.17g\" data-xmax=\"%.17g\" data-ymin=\"%.17g\" "
                   "data-ymax=\"%.17g\" data-left=\"%.1f\" data-right=\"%.1f\" data-top=\"%.1f\" "
                   "data-bottom=\"%.1f\">",
                   c->id, W, H, xlo, xhi, ylo, yhi, L, R, T, B);
    axes(b, c, xlo, xhi, xs, xn, ylo, yhi, ys, yn);
    if (empty)
        fl_tbuf_printf(b,
                       "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#888\">"
                       "not in the log</text>",
                       (L + R) / 2, (T + B) / 2);
    for (size_t k = 0; k < c->ns; k++)
        series(b, c, &c->s[k], xlo, xhi, ylo, yhi);
    fl_tbuf_puts(b, "</svg>");
}

void tf_svg_legend(fl_tbuf *b, const tf_series *s, size_t ns, int with_run)
{
    fl_tbuf_puts(b, "<div class=\"legend\">");
    for (size_t k = 0; k < ns; k++) {
        fl_tbuf_printf(b,
                       "<span class=\"key\"><svg width=\"30\" height=\"10\" "
                       "aria-hidden=\"true\">"
                       "<line x1=\"1\" y1=\"5\" x2=\"29\" y2=\"5\" stroke=\"%s\" "
                       "stroke-width=\"%s\"%s/></svg>",
                       tf_svg_color(s[k].color), s[k].style == TF_LINE_THIN ? "1.5" : "2.5",
                       dash(s[k].style));
        if (with_run) {
            tf_html_escape(b, s[k].run);
            fl_tbuf_puts(b, " ");
        }
        tf_html_escape(b, s[k].label);
        fl_tbuf_puts(b, "</span>");
    }
    fl_tbuf_puts(b, "</div>");
}

/* one run's bar: its parts left to right, each with a tooltip and its share when wide enough */
static void split_bar(fl_tbuf *b, const char *run, const char *const *names, const double *part,
                      size_t nparts, double y, double max_total)
{
    const double x0 = 150, x1 = 560;
    double total = 0, x = x0;
    for (size_t k = 0; k < nparts; k++)
        total += part[k] > 0 ? part[k] : 0;
    fl_tbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\">", x0 - 8,
                   y + 16);
    tf_html_escape(b, run);
    fl_tbuf_puts(b, "</text>");
    for (size_t k = 0; k < nparts; k++) {
        if (!(part[k] > 0) || !(max_total > 0))
            continue;
        double w = part[k] / max_total * (x1 - x0), share = 100 * part[k] / total;
        fl_tbuf_printf(b,
                       "<rect class=\"part\" data-part=\"%s\" x=\"%.2f\" y=\"%.1f\" "
                       "width=\"%.2f\" height=\"22\" fill=\"%s\"><title>",
                       names[k], x, y, w, tf_svg_color((int)k));
        tf_html_escape(b, run);
        fl_tbuf_printf(b, ": %s %.3g s (%.1f%%)</title></rect>", names[k], part[k], share);
        if (w > 38)
            fl_tbuf_printf(b,
                           "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
                           "fill=\"#fff\">%.0f%%</text>",
                           x + w / 2, y + 15, share);
        x += w;
    }
    fl_tbuf_printf(b, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"12\" fill=\"#444\">%.3g s</text>",
                   x + 6, y + 16, total);
}

void tf_svg_split(fl_tbuf *b, const char *const *runs, size_t nruns, const char *const *names,
                  const double *part, size_t nparts)
{
    double max_total = 0;
    for (size_t r = 0; r < nruns; r++) {
        double t = 0;
        for (size_t k = 0; k < nparts; k++)
            t += part[r * nparts + k] > 0 ? part[r * nparts + k] : 0;
        max_total = fmax(max_total, t);
    }
    const double h = 12 + 32.0 * (double)nruns;
    fl_tbuf_printf(b,
                   "<svg class=\"chart split\" data-chart=\"split\" viewBox=\"0 0 %.0f %.0f\" "
                   "role=\"img\">",
                   W, h);
    for (size_t r = 0; r < nruns; r++)
        split_bar(b, runs[r], names, part + r * nparts, nparts, 8 + 32.0 * (double)r, max_total);
    fl_tbuf_puts(b, "</svg><div class=\"legend\">");
    for (size_t k = 0; k < nparts; k++)
        fl_tbuf_printf(b,
                       "<span class=\"key\"><span class=\"swatch\" style=\"background:%s\">"
                       "</span>%s</span>",
                       tf_svg_color((int)k), names[k]);
    fl_tbuf_puts(b, "</div>");
}
