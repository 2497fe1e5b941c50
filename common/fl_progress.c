/* fl_progress.c — human-readable sizes, counts, rates and durations, and a one-line progress bar
 * with rate and ETA on stderr, drawn only on a terminal (see fl_progress.h). Redraws are
 * rate-limited so updating the bar per item costs a clock read. */
#include "fl_progress.h"

#include "fl_clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *fl_cli_human_bytes(uint64_t bytes, char *buf, size_t cap)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (v < 99.95)
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    else
        snprintf(buf, cap, "%.0f %s", v, units[u]);
    return buf;
}

char *fl_cli_human_count(double n, char *buf, size_t cap)
{
    static const char *pre[] = {"", " k", " M", " G", " T", " P"};
    if (!isfinite(n)) {
        snprintf(buf, cap, "?");
        return buf;
    }
    int u = 0;
    double v = n;
    while (fabs(v) >= 1000.0 && u < 5) {
        v /= 1000.0;
        u++;
    }
    if (u == 0) {
        if (v == floor(v))
            snprintf(buf, cap, "%.0f", v);
        else
            snprintf(buf, cap, "%.1f", v);
    } else if (fabs(v) < 99.95) {
        snprintf(buf, cap, "%.1f%s", v, pre[u]);
    } else {
        snprintf(buf, cap, "%.0f%s", v, pre[u]);
    }
    return buf;
}

char *fl_cli_human_rate(double per_second, const char *unit, char *buf, size_t cap)
{
    char num[64];
    if (unit && !strcmp(unit, "B/s")) {
        fl_cli_human_bytes(per_second > 0 && isfinite(per_second) ? (uint64_t)per_second : 0, num,
                           sizeof num);
        snprintf(buf, cap, "%s/s", num);
        return buf;
    }
    fl_cli_human_count(per_second, num, sizeof num);
    snprintf(buf, cap, "%s %s", num, unit ? unit : "/s");
    return buf;
}

char *fl_cli_human_duration(double s, char *buf, size_t cap)
{
    if (!isfinite(s) || s < 0) {
        snprintf(buf, cap, "?");
    } else if (s < 10) {
        snprintf(buf, cap, "%.2f s", s);
    } else if (s < 60) {
        snprintf(buf, cap, "%.1f s", s);
    } else if (s < 3600) {
        unsigned t = (unsigned)(s + 0.5);
        snprintf(buf, cap, "%um %02us", t / 60, t % 60);
    } else {
        unsigned long t = (unsigned long)(s / 60 + 0.5);
        snprintf(buf, cap, "%luh %02lum", t / 60, t % 60);
    }
    return buf;
}

struct fl_progress {
    char label[64];
    char unit[16];
    uint64_t total, done;
    double t0, last_draw;
    int active;
    int drawn_width;
};

fl_progress *fl_progress_start(const char *label, uint64_t total, const char *unit, int quiet)
{
    fl_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "it");
    p->total = total;
    p->t0 = fl_now_s();
    p->last_draw = 0;
    p->active = !quiet && isatty(STDERR_FILENO);
    return p;
}

int fl_progress_active(const fl_progress *p) { return p && p->active; }

static void draw(fl_progress *p, double now)
{
    char line[256], rate[48], eta[32];
    double el = now - p->t0;
    double r = el > 0 ? (double)p->done / el : 0;
    char unit_s[24];
    snprintf(unit_s, sizeof unit_s, "%s/s", p->unit);
    fl_cli_human_rate(r, unit_s, rate, sizeof rate);
    int n;
    if (p->total) {
        double f = (double)p->done / (double)p->total;
        if (f > 1)
            f = 1;
        char bar[31];
        int fill = (int)(f * 30);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        if (r > 0 && p->done < p->total)
            fl_cli_human_duration((double)(p->total - p->done) / r, eta, sizeof eta);
        else
            snprintf(eta, sizeof eta, "-");
        n = snprintf(line, sizeof line, "%s [%s] %5.1f%% %llu/%llu %s ETA %s", p->label, bar,
                     f * 100, (unsigned long long)p->done, (unsigned long long)p->total, rate, eta);
    } else {
        n = snprintf(line, sizeof line, "%s %llu %s %s", p->label, (unsigned long long)p->done,
                     p->unit, rate);
    }
    if (n < 0)
        return;
    if (n >= (int)sizeof line)
        n = (int)sizeof line - 1;
    int pad = p->drawn_width > n ? p->drawn_width - n : 0;
    fprintf(stderr, "\r%s%*s", line, pad, "");
    fflush(stderr);
    p->drawn_width = n;
    p->last_draw = now;
}

void fl_progress_update(fl_progress *p, uint64_t done)
{
    if (!p || !p->active)
        return;
    p->done = done;
    double now = fl_now_s();
    if (now - p->last_draw >= 0.1 || (p->total && done >= p->total))
        draw(p, now);
}

void fl_progress_finish(fl_progress *p)
{
    if (!p)
        return;
    if (p->active && p->drawn_width) {
        fprintf(stderr, "\r%*s\r", p->drawn_width, "");
        fflush(stderr);
    }
    free(p);
}
