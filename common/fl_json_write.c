/* fl_json_write.c — a tiny JSON text builder with correct string escaping (see fl_json.h). Used
 * for --json outputs and for the options object packdata stores in the manifest. */
#include "fl_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void fl_json_init(fl_json *j) { memset(j, 0, sizeof *j); }

void fl_json_free(fl_json *j) {
    free(j->buf);
    memset(j, 0, sizeof *j);
}

const char *fl_json_text(const fl_json *j) { return (j->buf && !j->failed) ? j->buf : ""; }

int fl_json_failed(const fl_json *j) { return j->failed; }

static void put(fl_json *j, const char *s, size_t n) {
    if (j->failed) return;
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (cap < j->len + n + 1) cap *= 2;
        char *b = realloc(j->buf, cap);
        if (!b) {
            j->failed = 1;
            return;
        }
        j->buf = b;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = 0;
}

static void puts_(fl_json *j, const char *s) { put(j, s, strlen(s)); }

/* Comma handling: before any value (or key) at the current level, emit "," if something was
 * already written there — except right after a key. */
static void before_value(fl_json *j) {
    if (j->after_key) {
        j->after_key = 0;
        return;
    }
    if (j->depth > 0 && j->depth <= 32) {
        if (j->need_comma[j->depth - 1]) put(j, ",", 1);
        j->need_comma[j->depth - 1] = 1;
    }
}

static void open_(fl_json *j, char c) {
    before_value(j);
    put(j, &c, 1);
    if (j->depth >= 32) {
        j->failed = 1;
        return;
    }
    j->need_comma[j->depth++] = 0;
}

static void close_(fl_json *j, char c) {
    if (j->depth > 0) j->depth--;
    put(j, &c, 1);
}

void fl_json_begin_object(fl_json *j) { open_(j, '{'); }
void fl_json_end_object(fl_json *j) { close_(j, '}'); }
void fl_json_begin_array(fl_json *j) { open_(j, '['); }
void fl_json_end_array(fl_json *j) { close_(j, ']'); }

static void escaped(fl_json *j, const char *s, size_t n) {
    put(j, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *rep = NULL;
        char u[8];
        switch (c) {
        case '"': rep = "\\\""; break;
        case '\\': rep = "\\\\"; break;
        case '\n': rep = "\\n"; break;
        case '\r': rep = "\\r"; break;
        case '\t': rep = "\\t"; break;
        case '\b': rep = "\\b"; break;
        case '\f': rep = "\\f"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                snprintf(u, sizeof u, "\\u%04x", c);
                rep = u;
            }
        }
        if (rep) {
            put(j, s + i - run, run);
            run = 0;
            puts_(j, rep);
        } else {
            run++;
        }
    }
    put(j, s + n - run, run);
    put(j, "\"", 1);
}

void fl_json_key(fl_json *j, const char *key) {
    before_value(j);
    escaped(j, key, strlen(key));
    put(j, ":", 1);
    j->after_key = 1;
}

void fl_json_string_n(fl_json *j, const char *s, size_t len) {
    before_value(j);
    escaped(j, s ? s : "", s ? len : 0);
}

void fl_json_string(fl_json *j, const char *s) {
    if (!s) {
        fl_json_null(j);
        return;
    }
    fl_json_string_n(j, s, strlen(s));
}

void fl_json_int(fl_json *j, int64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, v);
    before_value(j);
    puts_(j, b);
}

void fl_json_uint(fl_json *j, uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, v);
    before_value(j);
    puts_(j, b);
}

void fl_json_double(fl_json *j, double v) {
    before_value(j);
    if (!isfinite(v)) {
        puts_(j, "null");
        return;
    }
    char b[40];
    snprintf(b, sizeof b, "%.6g", v);
    puts_(j, b);
}

void fl_json_bool(fl_json *j, int v) {
    before_value(j);
    puts_(j, v ? "true" : "false");
}

void fl_json_null(fl_json *j) {
    before_value(j);
    puts_(j, "null");
}

void fl_json_raw(fl_json *j, const char *text) {
    before_value(j);
    puts_(j, text);
}

void fl_json_fputs(FILE *out, const char *s, size_t len) {
    fl_json j;
    fl_json_init(&j);
    escaped(&j, s, len);
    fputs(fl_json_text(&j), out);
    fl_json_free(&j);
}
