/* report_svg.h — the charts of the HTML report as inline SVG (report_svg.c): a line chart with
 * axes, ticks, grid and labels, and the stacked bar of where a run's time went. Private to the
 * report (report_html.c). Every chart carries its mapping as data attributes (data-xmin,
 * data-xmax, data-ymin, data-ymax and the plot box data-left/right/top/bottom in viewBox units)
 * and each series is one <polyline data-run=".." data-series=".."> of its finite points, so a
 * test can map the drawn points back to the logged values. */
#ifndef TF_REPORT_SVG_H
#define TF_REPORT_SVG_H

#include <stddef.h>

#include "fl_json.h"

enum { TF_LINE_SOLID = 0, TF_LINE_DASHED, TF_LINE_DOTTED, TF_LINE_THIN };

/* One series: n values y[i * stride] at x[i * stride] (non-finite values are left out). */
typedef struct tf_series {
    const char *key;   /* data-series ("val_top1") */
    const char *label; /* legend and tooltip text ("val top-1"); escaped when written */
    const char *run;   /* the run's name (tooltips); escaped */
    int run_index;     /* data-run */
    int color;         /* palette index */
    int style;         /* TF_LINE_* */
    int markers;       /* a circle with a tooltip per point */
    const double *x, *y;
    size_t n, stride;
    double scale; /* y drawn as y * scale (100: fractions as percent) */
} tf_series;

typedef struct tf_chart {
    const char *id;     /* data-chart */
    const char *ylabel; /* the y axis, with its unit */
    const char *xlabel;
    const char *unit; /* after values in tooltips ("%", "img/s"); may be "" */
    int y_from_zero;  /* the y axis starts at 0 (rates, fractions) */
    double y_cap;     /* the y axis ends at most here (100 for percent); NaN: none */
    const tf_series *s;
    size_t ns;
} tf_chart;

/* The palette colour i (CSS hex). */
const char *tf_svg_color(int i);

/* Append the chart's <svg> to b. A chart with no finite point draws its axes and says so. */
void tf_svg_chart(fl_tbuf *b, const tf_chart *c);

/* The legend of a chart (HTML: a line sample and the label per series). */
void tf_svg_legend(fl_tbuf *b, const tf_series *s, size_t ns, int with_run);

/* Where the time went: one horizontal stacked bar per run. part[r * nparts + k] is run r's
 * seconds in part k (named names[k]); runs[r] names run r. */
void tf_svg_split(fl_tbuf *b, const char *const *runs, size_t nruns, const char *const *names,
                  const double *part, size_t nparts);

/* a number for an axis or a tooltip: 3 significant digits, k/M for large values */
void tf_svg_number(char *out, size_t cap, double v);

#endif
