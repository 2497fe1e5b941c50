/* fl_text.h — the one escaping rule for text that came from a data set, a list or a checkpoint
 * (class names, file names, record names) and is printed to a terminal, a log or a CSV file: a
 * name may hold ESC, OSC, BEL or CR, which retitle or rewrite the user's terminal, and a CSV
 * cell starting with = + - @ is a formula to a spreadsheet. Header-only, like fl_clock.h: the
 * libraries (whose internal symbols are hidden) and every front end use the same code. */
#ifndef FL_TEXT_H
#define FL_TEXT_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of fl_text_escape. */
enum {
    FL_TEXT_KEEP_LINES = 1u /* keep '\n' and '\t' (a whole message whose lines are ours) */
};

/* Copy the NUL-terminated `s` into `out` (`cap` bytes, always NUL-terminated when cap > 0) with
 * every control character made visible: C0 bytes and DEL as \xNN (ESC is \x1b, BEL \x07, CR
 * \x0d), the C1 controls U+0080..U+009F (UTF-8 C2 80..C2 9F, which some terminals obey: CSI,
 * OSC) as \u00NN; everything else, other UTF-8 and invalid bytes included, unchanged. Text that
 * does not fit ends in "...". Returns `out`. */
static inline char *fl_text_escape(const char *s, unsigned flags, char *out, size_t cap);

/* 1 when `s` holds anything fl_text_escape would change, else 0. */
static inline int fl_text_needs_escape(const char *s, unsigned flags);

/* Write `s` to `f` as one CSV cell: quoted (RFC 4180) when it holds a comma, quote or line
 * break, and a cell starting with = + - @ TAB or CR (a formula to a spreadsheet) is quoted and
 * prefixed with ' so it reads as text. */
static inline void fl_csv_cell(FILE *f, const char *s);

/* ---- implementation (header-only: the libraries and every front end use it) ---- */

/* Bytes of the escape of s[0..] (0: copied as is) and the escape itself in `esc`. */
static inline size_t fl_text_escape_at_(const unsigned char *s, unsigned flags, char esc[8],
                                        size_t *in)
{
    static const char hx[] = "0123456789abcdef";
    unsigned c = s[0];
    *in = 1;
    if ((c < 0x20 || c == 0x7f) && !((flags & FL_TEXT_KEEP_LINES) && (c == '\n' || c == '\t'))) {
        esc[0] = '\\', esc[1] = 'x', esc[2] = hx[c >> 4], esc[3] = hx[c & 15];
        return 4;
    }
    if (c == 0xC2 && s[1] >= 0x80 && s[1] <= 0x9F) {
        *in = 2;
        memcpy(esc, "\\u00", 4);
        esc[4] = hx[s[1] >> 4], esc[5] = hx[s[1] & 15];
        return 6;
    }
    return 0;
}

static inline int fl_text_needs_escape(const char *s, unsigned flags)
{
    char esc[8];
    size_t in;
    for (const unsigned char *p = (const unsigned char *)s; *p; p += in)
        if (fl_text_escape_at_(p, flags, esc, &in))
            return 1;
    return 0;
}

static inline char *fl_text_escape(const char *s, unsigned flags, char *out, size_t cap)
{
    if (!cap)
        return out;
    size_t o = 0, lim = cap > 4 ? cap - 4 : 0; /* room kept for "..." and the NUL */
    int cut = 0;
    char esc[8];
    size_t in;
    for (const unsigned char *p = (const unsigned char *)s; *p; p += in) {
        size_t e = fl_text_escape_at_(p, flags, esc, &in);
        size_t n = e ? e : in;
        if (o + n > lim) {
            cut = 1;
            break;
        }
        memcpy(out + o, e ? esc : (const char *)p, n);
        o += n;
    }
    if (cut && cap >= 4) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
    return out;
}

static inline void fl_csv_cell(FILE *f, const char *s)
{
    int formula = strchr("=+-@\t\r", s[0]) != NULL && s[0] != 0;
    if (!formula && !strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    if (formula)
        fputc('\'', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

#ifdef __cplusplus
}
#endif
#endif
