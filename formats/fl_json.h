/* fl_json.h — internal: a small, bounds-checked JSON reader (for manifests, which are untrusted
 * bytes and fuzzed) and a growable text buffer with JSON string escaping (for writing them).
 * Not a general-purpose JSON library: numbers are kept as double plus an exact int64 when integral. */
#ifndef FL_JSON_H
#define FL_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "fl_error.h"

typedef enum fl_jtype {
    FL_J_NULL = 0,
    FL_J_BOOL,
    FL_J_NUMBER,
    FL_J_STRING,
    FL_J_ARRAY,
    FL_J_OBJECT
} fl_jtype;

/* A parsed value. Nodes live in the document's arena; pointers stay valid until fl_jfree. */
typedef struct fl_jnode fl_jnode;
struct fl_jnode {
    fl_jtype type;
    int is_int;          /* number is an integer that fits int64 */
    int64_t ival;        /* when is_int */
    double dval;         /* numbers */
    int bval;            /* booleans */
    char *str;           /* strings: decoded UTF-8, NUL-terminated (may contain no NUL: \u0000 rejected) */
    size_t str_len;
    char *key;           /* member name when this value is an object member, else NULL */
    fl_jnode *child;      /* first element/member (arrays, objects) */
    fl_jnode *next;       /* next sibling */
    size_t count;        /* number of elements/members */
    size_t src_begin;    /* byte span of this value in the source text */
    size_t src_end;
};

typedef struct fl_jdoc fl_jdoc;

/* Parse `len` bytes of `text` (need not be NUL-terminated). Limits: nesting depth 64, and the
 * whole text must be one value plus whitespace. `what` names the source in error messages.
 * Errors: FL_E_FORMAT ("what: byte N: reason"), -ENOMEM. */
int fl_jparse(const char *text, size_t len, const char *what, fl_jdoc **out, fl_error *err);
const fl_jnode *fl_jroot(const fl_jdoc *doc);
void fl_jfree(fl_jdoc *doc);

/* Member `key` of an object, or NULL (also when `obj` is NULL or not an object). */
const fl_jnode *fl_jget(const fl_jnode *obj, const char *key);
/* Element i of an array, or NULL. O(i). */
const fl_jnode *fl_jat(const fl_jnode *arr, size_t i);

/* Growable NUL-terminated text buffer. On allocation failure `failed` is set and later appends
 * are ignored; check it once at the end. */
typedef struct fl_tbuf {
    char *data;
    size_t len;
    size_t cap;
    int failed;
} fl_tbuf;

void fl_tbuf_append(fl_tbuf *b, const char *s, size_t n);
void fl_tbuf_puts(fl_tbuf *b, const char *s);
void fl_tbuf_printf(fl_tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append `s` (n bytes) as a quoted JSON string, escaping quotes, backslashes and control bytes. */
void fl_tbuf_json_string(fl_tbuf *b, const char *s, size_t n);
void fl_tbuf_free(fl_tbuf *b);

#endif
