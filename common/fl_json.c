/* fl_json.c — fastload's JSON module (see fl_json.h): the reader (strict RFC 8259 grammar,
 * depth-limited, every read bounds-checked because manifests are untrusted input), the escaping
 * text buffer manifests are written with, and the JSON text builder of --json outputs. */
#include "fl_json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} arena_block;

struct fl_jdoc {
    arena_block *blocks;
    fl_jnode *root;
};

typedef struct parser {
    const char *s;
    size_t len, pos;
    const char *what;
    fl_jdoc *doc;
    fl_error *err;
    int code;
} parser;

static void *arena_alloc(fl_jdoc *doc, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_block *b = doc->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = doc->blocks;
        doc->blocks = b;
    }
    void *p = b->mem + b->used;
    b->used += n;
    return p;
}

static int fail(parser *p, const char *reason)
{
    if (p->code == 0) {
        p->code = FL_E_FORMAT;
        fl_error_set(p->err, FL_E_FORMAT, "%s: JSON byte %zu: %s", p->what, p->pos, reason);
    }
    return -1;
}

static int oom(parser *p)
{
    if (p->code == 0) {
        p->code = -ENOMEM;
        fl_error_set(p->err, -ENOMEM, "%s: out of memory parsing JSON", p->what);
    }
    return -1;
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int read_hex4(parser *p, unsigned *out)
{
    if (p->len - p->pos < 4)
        return fail(p, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[p->pos + i]);
        if (h < 0)
            return fail(p, "bad \\u escape");
        v = v * 16 + (unsigned)h;
    }
    p->pos += 4;
    *out = v;
    return 0;
}

/* Parse a string starting at the opening quote; the decoded text is never longer than the source.
 */
static int parse_string(parser *p, char **out, size_t *out_len)
{
    p->pos++; /* opening quote */
    size_t start = p->pos, end = start;
    /* find the closing quote to bound the output size */
    while (end < p->len && p->s[end] != '"') {
        if (p->s[end] == '\\')
            end++;
        end++;
    }
    if (end >= p->len)
        return fail(p, "unterminated string");
    char *dst = arena_alloc(p->doc, end - start + 1);
    if (!dst)
        return oom(p);
    size_t n = 0;
    while (p->pos < end) {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c < 0x20)
            return fail(p, "control character in string");
        if (c != '\\') {
            dst[n++] = (char)c;
            p->pos++;
            continue;
        }
        p->pos++;
        if (p->pos >= end)
            return fail(p, "truncated escape");
        char e = p->s[p->pos++];
        switch (e) {
        case '"': dst[n++] = '"'; break;
        case '\\': dst[n++] = '\\'; break;
        case '/': dst[n++] = '/'; break;
        case 'b': dst[n++] = '\b'; break;
        case 'f': dst[n++] = '\f'; break;
        case 'n': dst[n++] = '\n'; break;
        case 'r': dst[n++] = '\r'; break;
        case 't': dst[n++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (p->pos > end || read_hex4(p, &cp))
                return fail(p, "bad \\u escape");
            if (p->pos > end)
                return fail(p, "bad \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (end - p->pos < 6 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
                    return fail(p, "unpaired surrogate");
                p->pos += 2;
                if (read_hex4(p, &lo))
                    return -1;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail(p, "unpaired surrogate");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return fail(p, "unpaired surrogate");
            }
            if (cp == 0)
                return fail(p, "\\u0000 not allowed in strings");
            /* A \u escape is 6 (or 12) source bytes and yields at most 4 bytes: fits. */
            if (cp < 0x80) {
                dst[n++] = (char)cp;
            } else if (cp < 0x800) {
                dst[n++] = (char)(0xC0 | (cp >> 6));
                dst[n++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                dst[n++] = (char)(0xE0 | (cp >> 12));
                dst[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                dst[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                dst[n++] = (char)(0xF0 | (cp >> 18));
                dst[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                dst[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                dst[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: return fail(p, "bad escape");
        }
    }
    if (p->pos != end)
        return fail(p, "bad escape at end of string");
    p->pos = end + 1;
    dst[n] = '\0';
    *out = dst;
    *out_len = n;
    return 0;
}

static int parse_number(parser *p, fl_jnode *v)
{
    size_t start = p->pos;
    int integral = 1;
    if (p->pos < p->len && p->s[p->pos] == '-')
        p->pos++;
    if (p->pos >= p->len)
        return fail(p, "bad number");
    if (p->s[p->pos] == '0') {
        p->pos++;
    } else if (p->s[p->pos] >= '1' && p->s[p->pos] <= '9') {
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
    } else {
        return fail(p, "bad number");
    }
    if (p->pos < p->len && p->s[p->pos] == '.') {
        integral = 0;
        p->pos++;
        size_t d = p->pos;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
        if (p->pos == d)
            return fail(p, "bad number");
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        integral = 0;
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
            p->pos++;
        size_t d = p->pos;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
        if (p->pos == d)
            return fail(p, "bad number");
    }
    size_t n = p->pos - start;
    char tmp[64];
    if (n >= sizeof tmp)
        return fail(p, "number too long");
    memcpy(tmp, p->s + start, n);
    tmp[n] = '\0';
    v->type = FL_J_NUMBER;
    v->dval = strtod(tmp, NULL);
    if (integral) {
        errno = 0;
        long long ll = strtoll(tmp, NULL, 10);
        if (errno == 0) {
            v->is_int = 1;
            v->ival = ll;
        }
    }
    return 0;
}

static int parse_value(parser *p, fl_jnode *v, int depth);

static int parse_container(parser *p, fl_jnode *v, int depth, int is_obj)
{
    if (depth >= JSON_MAX_DEPTH)
        return fail(p, "nesting too deep");
    v->type = is_obj ? FL_J_OBJECT : FL_J_ARRAY;
    char close = is_obj ? '}' : ']';
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return 0;
    }
    fl_jnode **tail = &v->child;
    for (;;) {
        skip_ws(p);
        fl_jnode *c = arena_alloc(p->doc, sizeof *c);
        if (!c)
            return oom(p);
        memset(c, 0, sizeof *c);
        if (is_obj) {
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return fail(p, "expected member name");
            size_t kl;
            if (parse_string(p, &c->key, &kl))
                return -1;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':')
                return fail(p, "expected ':'");
            p->pos++;
            skip_ws(p);
        }
        if (parse_value(p, c, depth + 1))
            return -1;
        *tail = c;
        tail = &c->next;
        v->count++;
        skip_ws(p);
        if (p->pos >= p->len)
            return fail(p, "unterminated container");
        char ch = p->s[p->pos++];
        if (ch == close)
            return 0;
        if (ch != ',')
            return fail(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int match_word(parser *p, const char *w)
{
    size_t n = strlen(w);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, w, n) != 0)
        return fail(p, "unexpected token");
    p->pos += n;
    return 0;
}

static int parse_value(parser *p, fl_jnode *v, int depth)
{
    skip_ws(p);
    if (p->pos >= p->len)
        return fail(p, "unexpected end of text");
    v->src_begin = p->pos;
    int rc;
    char c = p->s[p->pos];
    switch (c) {
    case '{': rc = parse_container(p, v, depth, 1); break;
    case '[': rc = parse_container(p, v, depth, 0); break;
    case '"':
        v->type = FL_J_STRING;
        rc = parse_string(p, &v->str, &v->str_len);
        break;
    case 't':
        v->type = FL_J_BOOL;
        v->bval = 1;
        rc = match_word(p, "true");
        break;
    case 'f':
        v->type = FL_J_BOOL;
        v->bval = 0;
        rc = match_word(p, "false");
        break;
    case 'n':
        v->type = FL_J_NULL;
        rc = match_word(p, "null");
        break;
    default: rc = parse_number(p, v); break;
    }
    v->src_end = p->pos;
    return rc;
}

void fl_jfree(fl_jdoc *doc)
{
    if (!doc)
        return;
    arena_block *b = doc->blocks;
    while (b) {
        arena_block *n = b->next;
        free(b);
        b = n;
    }
    free(doc);
}

int fl_jparse(const char *text, size_t len, const char *what, fl_jdoc **out, fl_error *err)
{
    *out = NULL;
    fl_jdoc *doc = calloc(1, sizeof *doc);
    if (!doc)
        return fl_error_set(err, -ENOMEM, "%s: out of memory", what);
    parser p = {.s = text, .len = len, .pos = 0, .what = what, .doc = doc, .err = err, .code = 0};
    fl_jnode *root = arena_alloc(doc, sizeof *root);
    if (!root) {
        fl_jfree(doc);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", what);
    }
    memset(root, 0, sizeof *root);
    if (parse_value(&p, root, 0) == 0) {
        skip_ws(&p);
        if (p.pos != p.len)
            fail(&p, "trailing bytes after the JSON value");
    }
    if (p.code) {
        fl_jfree(doc);
        return p.code;
    }
    doc->root = root;
    *out = doc;
    return 0;
}

const fl_jnode *fl_jroot(const fl_jdoc *doc) { return doc ? doc->root : NULL; }

const fl_jnode *fl_jget(const fl_jnode *obj, const char *key)
{
    if (!obj || obj->type != FL_J_OBJECT)
        return NULL;
    for (const fl_jnode *c = obj->child; c; c = c->next)
        if (strcmp(c->key, key) == 0)
            return c;
    return NULL;
}

const fl_jnode *fl_jat(const fl_jnode *arr, size_t i)
{
    if (!arr || arr->type != FL_J_ARRAY)
        return NULL;
    const fl_jnode *c = arr->child;
    while (c && i--)
        c = c->next;
    return c;
}

/* ---- writer side ----------------------------------------------------------------------------- */

static int buf_reserve(fl_tbuf *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->failed = 1;
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

void fl_tbuf_append(fl_tbuf *b, const char *s, size_t n)
{
    if (buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void fl_tbuf_puts(fl_tbuf *b, const char *s) { fl_tbuf_append(b, s, strlen(s)); }

void fl_tbuf_printf(fl_tbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof tmp) {
        fl_tbuf_append(b, tmp, (size_t)n);
        return;
    }
    if (buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the well-formed UTF-8 sequence at s[0..n) (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0 when s[0] does not start one. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if ((s[k] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* Append `s` (n bytes) to `b` as a quoted JSON string. Both styles write \" \\ \n \r \t and the
 * other bytes below 0x20 as \u00XX, and pass well-formed UTF-8 through; `full` (the builder's
 * style) also writes \b and \f short and DEL (0x7f) as \u007f. The manifest writer keeps the plain
 * style so manifests stay byte for byte what earlier versions wrote. Bytes that are not well-formed
 * UTF-8 (a file or class name from a Latin-1 file system, say) are written as \u00XX too, each byte
 * read as the Latin-1 character of that value: the output is always valid JSON (a JSON text must be
 * UTF-8), no two such names become one string (as U+FFFD would make them), and a Latin-1 name reads
 * as intended. */
static void json_quote(fl_tbuf *b, const char *s, size_t n, int full)
{
    fl_tbuf_append(b, "\"", 1);
    size_t run = 0; /* start of the bytes not yet appended */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *rep;
        char u[8];
        if (c >= 0x80) {
            size_t l = utf8_seq_len((const unsigned char *)s + i, n - i);
            if (l) {
                i += l - 1;
                continue;
            }
            snprintf(u, sizeof u, "\\u%04x", c);
            rep = u;
        } else if (c == '"')
            rep = "\\\"";
        else if (c == '\\')
            rep = "\\\\";
        else if (c == '\n')
            rep = "\\n";
        else if (c == '\r')
            rep = "\\r";
        else if (c == '\t')
            rep = "\\t";
        else if (full && c == '\b')
            rep = "\\b";
        else if (full && c == '\f')
            rep = "\\f";
        else if (c < 0x20 || (full && c == 0x7f)) {
            snprintf(u, sizeof u, "\\u%04x", c);
            rep = u;
        } else {
            continue;
        }
        fl_tbuf_append(b, s + run, i - run);
        run = i + 1;
        fl_tbuf_puts(b, rep);
    }
    fl_tbuf_append(b, s + run, n - run);
    fl_tbuf_append(b, "\"", 1);
}

void fl_tbuf_json_string(fl_tbuf *b, const char *s, size_t n) { json_quote(b, s, n, 0); }

void fl_tbuf_free(fl_tbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

/* ---- JSON text builder ------------------------------------------------------------------------
 */

void fl_json_init(fl_json *j) { memset(j, 0, sizeof *j); }

void fl_json_free(fl_json *j)
{
    fl_tbuf_free(&j->text);
    memset(j, 0, sizeof *j);
}

const char *fl_json_text(const fl_json *j)
{
    return (j->text.data && !j->text.failed) ? j->text.data : "";
}

int fl_json_failed(const fl_json *j) { return j->text.failed; }

static void put(fl_json *j, const char *s, size_t n) { fl_tbuf_append(&j->text, s, n); }

static void puts_(fl_json *j, const char *s) { put(j, s, strlen(s)); }

/* Comma handling: before any value (or key) at the current level, emit "," if something was
 * already written there — except right after a key. */
static void before_value(fl_json *j)
{
    if (j->after_key) {
        j->after_key = 0;
        return;
    }
    if (j->depth > 0 && j->depth <= 32) {
        if (j->need_comma[j->depth - 1])
            put(j, ",", 1);
        j->need_comma[j->depth - 1] = 1;
    }
}

static void open_(fl_json *j, char c)
{
    before_value(j);
    put(j, &c, 1);
    if (j->depth >= 32) {
        j->text.failed = 1;
        return;
    }
    j->need_comma[j->depth++] = 0;
}

static void close_(fl_json *j, char c)
{
    if (j->depth > 0)
        j->depth--;
    put(j, &c, 1);
}

void fl_json_begin_object(fl_json *j) { open_(j, '{'); }
void fl_json_end_object(fl_json *j) { close_(j, '}'); }
void fl_json_begin_array(fl_json *j) { open_(j, '['); }
void fl_json_end_array(fl_json *j) { close_(j, ']'); }

static void escaped(fl_json *j, const char *s, size_t n) { json_quote(&j->text, s, n, 1); }

void fl_json_key(fl_json *j, const char *key)
{
    before_value(j);
    escaped(j, key, strlen(key));
    put(j, ":", 1);
    j->after_key = 1;
}

void fl_json_string_n(fl_json *j, const char *s, size_t len)
{
    before_value(j);
    escaped(j, s ? s : "", s ? len : 0);
}

void fl_json_string(fl_json *j, const char *s)
{
    if (!s) {
        fl_json_null(j);
        return;
    }
    fl_json_string_n(j, s, strlen(s));
}

void fl_json_int(fl_json *j, int64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, v);
    before_value(j);
    puts_(j, b);
}

void fl_json_uint(fl_json *j, uint64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, v);
    before_value(j);
    puts_(j, b);
}

void fl_json_double(fl_json *j, double v)
{
    before_value(j);
    if (!isfinite(v)) {
        puts_(j, "null");
        return;
    }
    char b[40];
    snprintf(b, sizeof b, "%.6g", v);
    puts_(j, b);
}

void fl_json_bool(fl_json *j, int v)
{
    before_value(j);
    puts_(j, v ? "true" : "false");
}

void fl_json_null(fl_json *j)
{
    before_value(j);
    puts_(j, "null");
}

void fl_json_raw(fl_json *j, const char *text)
{
    before_value(j);
    puts_(j, text);
}

void fl_json_fputs(FILE *out, const char *s, size_t len)
{
    fl_json j;
    fl_json_init(&j);
    escaped(&j, s, len);
    fputs(fl_json_text(&j), out);
    fl_json_free(&j);
}
