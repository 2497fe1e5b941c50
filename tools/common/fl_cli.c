/* fl_cli.c — option helpers, number/size parsing, human-readable formatting and version/error
 * printing for the fastload command-line tools (see fl_cli.h). */
#include "fl_cli.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef FL_VERSION_STRING
#define FL_VERSION_STRING "0.0.0"
#endif

const char *fl_cli_version(void) { return FL_VERSION_STRING; }

void fl_cli_print_version(FILE *out, const char *tool) {
    fprintf(out, "%s (fastload) %s\n", tool, FL_VERSION_STRING);
}

static void vmsg(const char *tool, const char *kind, const char *fmt, va_list ap) {
    char line[2048];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "%s: %s: %s\n", tool ? tool : "fastload", kind, line);
}

void fl_cli_error(const char *tool, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(tool, "error", fmt, ap);
    va_end(ap);
}

void fl_cli_warn(const char *tool, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(tool, "warning", fmt, ap);
    va_end(ap);
}

int fl_cli_is_help(const char *arg) {
    return arg && (!strcmp(arg, "-h") || !strcmp(arg, "--help"));
}

int fl_cli_is_version(const char *arg) {
    return arg && (!strcmp(arg, "-V") || !strcmp(arg, "--version"));
}

int fl_cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value,
                     const char *tool) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) {
        fl_cli_error(tool, "option %s needs a value", name);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int fl_cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out) {
    if (!s || !isdigit((unsigned char)s[0])) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int fl_cli_parse_int(const char *s, long min, long max, long *out) {
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || isspace((unsigned char)s[0]) || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int fl_cli_parse_size(const char *s, uint64_t *out) {
    if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.')) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0)) return -1;
    double mult = 1;
    char c = (char)toupper((unsigned char)*end);
    switch (c) {
    case 'K': mult = 1024.0; break;
    case 'M': mult = 1024.0 * 1024; break;
    case 'G': mult = 1024.0 * 1024 * 1024; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
    case 'B': case '\0': break;
    default: return -1;
    }
    if (c == 'B') {
        end++;
    } else if (c) {
        end++;
        if (toupper((unsigned char)*end) == 'I') end++;
        if (toupper((unsigned char)*end) == 'B') end++;
    }
    if (*end) return -1;
    double r = v * mult;
    if (r >= 18446744073709551615.0) return -1;
    /* "1.5" bytes has no meaning: round to the nearest byte */
    *out = (uint64_t)(r + 0.5);
    return 0;
}

char *fl_cli_human_bytes(uint64_t bytes, char *buf, size_t cap) {
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
    if (v < 99.95) snprintf(buf, cap, "%.1f %s", v, units[u]);
    else snprintf(buf, cap, "%.0f %s", v, units[u]);
    return buf;
}

char *fl_cli_human_count(double n, char *buf, size_t cap) {
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
        if (v == floor(v)) snprintf(buf, cap, "%.0f", v);
        else snprintf(buf, cap, "%.1f", v);
    } else if (fabs(v) < 99.95) {
        snprintf(buf, cap, "%.1f%s", v, pre[u]);
    } else {
        snprintf(buf, cap, "%.0f%s", v, pre[u]);
    }
    return buf;
}

char *fl_cli_human_rate(double per_second, const char *unit, char *buf, size_t cap) {
    char num[64];
    if (unit && !strcmp(unit, "B/s")) {
        fl_cli_human_bytes(per_second > 0 && isfinite(per_second) ? (uint64_t)per_second : 0,
                           num, sizeof num);
        snprintf(buf, cap, "%s/s", num);
        return buf;
    }
    fl_cli_human_count(per_second, num, sizeof num);
    snprintf(buf, cap, "%s %s", num, unit ? unit : "/s");
    return buf;
}

char *fl_cli_human_duration(double s, char *buf, size_t cap) {
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

double fl_cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
