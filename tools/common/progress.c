/* progress.c — a one-line progress bar with rate and ETA on stderr, drawn only on a terminal
 * (see fl_cli.h). Redraws are rate-limited so updating it per item costs a clock read. */
#include "fl_cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fl_progress {
    char label[64];
    char unit[16];
    uint64_t total, done;
    double t0, last_draw;
    int active;
    int drawn_width;
};

fl_progress *fl_progress_start(const char *label, uint64_t total, const char *unit, int quiet) {
    fl_progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "it");
    p->total = total;
    p->t0 = fl_cli_now();
    p->last_draw = 0;
    p->active = !quiet && isatty(STDERR_FILENO);
    return p;
}

int fl_progress_active(const fl_progress *p) { return p && p->active; }

static void draw(fl_progress *p, double now) {
    char line[256], rate[48], eta[32];
    double el = now - p->t0;
    double r = el > 0 ? (double)p->done / el : 0;
    char unit_s[24];
    snprintf(unit_s, sizeof unit_s, "%s/s", p->unit);
    fl_cli_human_rate(r, unit_s, rate, sizeof rate);
    int n;
    if (p->total) {
        double f = (double)p->done / (double)p->total;
        if (f > 1) f = 1;
        char bar[31];
        int fill = (int)(f * 30);
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        if (r > 0 && p->done < p->total) fl_cli_human_duration((double)(p->total - p->done) / r, eta, sizeof eta);
        else snprintf(eta, sizeof eta, "-");
        n = snprintf(line, sizeof line, "%s [%s] %5.1f%% %llu/%llu %s ETA %s", p->label, bar, f * 100,
                     (unsigned long long)p->done, (unsigned long long)p->total, rate, eta);
    } else {
        n = snprintf(line, sizeof line, "%s %llu %s %s", p->label, (unsigned long long)p->done, p->unit, rate);
    }
    if (n < 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    int pad = p->drawn_width > n ? p->drawn_width - n : 0;
    fprintf(stderr, "\r%s%*s", line, pad, "");
    fflush(stderr);
    p->drawn_width = n;
    p->last_draw = now;
}

void fl_progress_update(fl_progress *p, uint64_t done) {
    if (!p || !p->active) return;
    p->done = done;
    double now = fl_cli_now();
    if (now - p->last_draw >= 0.1 || (p->total && done >= p->total)) draw(p, now);
}

void fl_progress_finish(fl_progress *p) {
    if (!p) return;
    if (p->active && p->drawn_width) {
        fprintf(stderr, "\r%*s\r", p->drawn_width, "");
        fflush(stderr);
    }
    free(p);
}
