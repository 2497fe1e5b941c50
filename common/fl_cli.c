/* fl_cli.c — strict number/size parsing, the one-line option errors and version/error printing
 * of the command-line layer (see fl_cli.h; the option tables are in fl_cli_table.c). */
#include "fl_cli.h"
#include "fl_text.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef FL_VERSION_STRING
#define FL_VERSION_STRING "0.0.0"
#endif

const char *fl_cli_version(void) { return FL_VERSION_STRING; }

void fl_cli_print_version(FILE *out, const char *tool)
{
    fprintf(out, "%s (fastload) %s\n", tool, FL_VERSION_STRING);
}

static void vmsg(const char *tool, const char *kind, const char *fmt, va_list ap)
{
    char line[2048], shown[4 * sizeof line];
    vsnprintf(line, sizeof line, fmt, ap);
    /* names in a message came from files: their control characters are shown, not obeyed */
    fl_text_escape(line, FL_TEXT_KEEP_LINES, shown, sizeof shown);
    fprintf(stderr, "%s: %s: %s\n", tool ? tool : "fastload", kind, shown);
}

void fl_cli_error(const char *tool, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(tool, "error", fmt, ap);
    va_end(ap);
}

void fl_cli_warn(const char *tool, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(tool, "warning", fmt, ap);
    va_end(ap);
}

int fl_cli_close_output(const char *tool, FILE *f, const char *what)
{
    /* an error flag set by an earlier buffered write leaves no errno behind: say so plainly */
    errno = 0;
    int bad = fflush(f) != 0;
    int e = errno;
    bad |= ferror(f) != 0;
    errno = 0;
    /* stdout stays open: a caller (or a test calling fl_cli_dispatch twice) may print again */
    if (f != stdout && fclose(f) != 0 && !e) {
        e = errno;
        bad = 1;
    }
    if (!bad)
        return FL_EXIT_OK;
    fl_cli_error(tool, "%s: cannot write: %s", what, e ? strerror(e) : "an earlier write failed");
    return FL_EXIT_DATA;
}

/* At most 40 characters of it: a 10,000-character value must not flood the terminal. */
const char *fl_cli_quote(const char *v, char *buf, size_t cap)
{
    size_t n = strlen(v);
    if (n <= 40)
        snprintf(buf, cap, "%s", v);
    else
        snprintf(buf, cap, "%.40s... (%zu characters)", v, n);
    return buf;
}

void fl_cli_opt_error(const char *tool, const char *opt, const char *value, const char *fmt, ...)
{
    char why[512], q[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (value) {
        fl_cli_quote(value, q, sizeof q);
        fl_cli_error(tool, "%s: %s (got '%s')", opt, why, q);
    } else {
        fl_cli_error(tool, "%s: %s", opt, why);
    }
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

int fl_cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || !all_digits(s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int fl_cli_parse_int(const char *s, long min, long max, long *out)
{
    if (!s || !all_digits(s[0] == '-' ? s + 1 : s))
        return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int fl_cli_parse_double(const char *s, double min, double max, int open_min, double *out)
{
    if (!s || !*s)
        return -1;
    /* decimal notation only: strtod would also take "nan", "inf", "0x1p3" and leading space */
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p) && !strchr("+-.eE", *p))
            return -1;
    if (!isdigit((unsigned char)s[0]) && !(s[0] == '.' || s[0] == '-' || s[0] == '+'))
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        return -1;
    if (open_min ? !(v > min) : !(v >= min))
        return -1;
    if (!(v <= max))
        return -1;
    *out = v;
    return 0;
}

int fl_cli_parse_size(const char *s, uint64_t *out)
{
    if (!s)
        return -1;
    /* digits with at most one '.', then an optional suffix: no sign, exponent, nan or inf */
    const char *end = s;
    int digits = 0, dots = 0;
    for (; isdigit((unsigned char)*end) || *end == '.'; end++) {
        if (*end == '.')
            dots++;
        else
            digits++;
    }
    if (!digits || dots > 1)
        return -1;
    errno = 0;
    double v = strtod(s, NULL);
    if (errno || !(v >= 0) || !isfinite(v))
        return -1;
    double mult = 1;
    char c = (char)toupper((unsigned char)*end);
    switch (c) {
    case 'K': mult = 1024.0; break;
    case 'M': mult = 1024.0 * 1024; break;
    case 'G': mult = 1024.0 * 1024 * 1024; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
    case 'B':
    case '\0': break;
    default: return -1;
    }
    if (c == 'B') {
        end++;
    } else if (c) {
        end++;
        if (toupper((unsigned char)*end) == 'I')
            end++;
        if (toupper((unsigned char)*end) == 'B')
            end++;
    }
    if (*end)
        return -1;
    double r = v * mult;
    if (r >= 18446744073709551615.0)
        return -1;
    /* "1.5" bytes has no meaning: round to the nearest byte */
    *out = (uint64_t)(r + 0.5);
    return 0;
}

int fl_cli_opt_u64(const char *tool, const char *opt, const char *v, uint64_t min, uint64_t max,
                   uint64_t *out)
{
    if (!fl_cli_parse_u64(v, min, max, out))
        return 0;
    if (max == UINT64_MAX)
        fl_cli_opt_error(tool, opt, v ? v : "",
                         "expected an integer of at least %llu (at most %llu)",
                         (unsigned long long)min, (unsigned long long)max);
    else
        fl_cli_opt_error(tool, opt, v ? v : "", "expected an integer from %llu to %llu",
                         (unsigned long long)min, (unsigned long long)max);
    return -1;
}

int fl_cli_opt_u32(const char *tool, const char *opt, const char *v, uint32_t min, uint32_t max,
                   uint32_t *out)
{
    uint64_t u;
    if (fl_cli_opt_u64(tool, opt, v, min, max, &u))
        return -1;
    *out = (uint32_t)u;
    return 0;
}

int fl_cli_opt_int(const char *tool, const char *opt, const char *v, long min, long max, long *out)
{
    if (!fl_cli_parse_int(v, min, max, out))
        return 0;
    fl_cli_opt_error(tool, opt, v ? v : "", "expected an integer from %ld to %ld", min, max);
    return -1;
}

int fl_cli_opt_double(const char *tool, const char *opt, const char *v, double min, double max,
                      int open_min, double *out)
{
    if (!fl_cli_parse_double(v, min, max, open_min, out))
        return 0;
    fl_cli_opt_error(tool, opt, v ? v : "", "expected a number %s %g and at most %g",
                     open_min ? "above" : "from", min, max);
    return -1;
}

int fl_cli_opt_float(const char *tool, const char *opt, const char *v, double min, double max,
                     int open_min, float *out)
{
    double d;
    if (fl_cli_opt_double(tool, opt, v, min, max, open_min, &d))
        return -1;
    *out = (float)d;
    return 0;
}

int fl_cli_opt_size(const char *tool, const char *opt, const char *v, uint64_t min, uint64_t max,
                    uint64_t *out)
{
    uint64_t u;
    if (!fl_cli_parse_size(v, &u) && u >= min && u <= max) {
        *out = u;
        return 0;
    }
    char a[32], b[32];
    fl_cli_opt_error(tool, opt, v ? v : "", "expected a size from %s to %s, e.g. 256M",
                     fl_cli_human_bytes(min, a, sizeof a), fl_cli_human_bytes(max, b, sizeof b));
    return -1;
}

void fl_cli_catch_signals(const int *sigs, size_t n, void (*handler)(int), int flags)
{
    for (size_t i = 0; i < n; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) || old.sa_handler == SIG_IGN)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = handler;
        sa.sa_flags = flags;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}
