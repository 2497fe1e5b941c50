/* fl_json.h — fastload's one JSON module (common/, internal; common/fl_json.c). Three parts:
 *   - the reader, fl_jparse: a small, bounds-checked parser into a tree (manifests, which are
 *     untrusted bytes and fuzzed; packdata info's manifest fields); every JSON read goes here;
 *   - fl_tbuf: a growable text buffer with JSON string quoting (the manifest writer);
 *   - fl_json: a JSON text builder that places commas itself (--json outputs of the tools, the
 *     options object packdata stores in manifests, trainfast's reports).
 * Not a general-purpose JSON library: numbers are kept as double plus an exact int64 when
 * integral. Writers never reorder or reformat: what a caller writes is what comes out. */
#ifndef FL_JSON_H
#define FL_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    int is_int;   /* number is an integer that fits int64 */
    int64_t ival; /* when is_int */
    double dval;  /* numbers */
    int bval;     /* booleans */
    char *str;    /* strings: decoded UTF-8, NUL-terminated (may contain no NUL: \u0000 rejected) */
    size_t str_len;
    char *key;        /* member name when this value is an object member, else NULL */
    fl_jnode *child;  /* first element/member (arrays, objects) */
    fl_jnode *next;   /* next sibling */
    size_t count;     /* number of elements/members */
    size_t src_begin; /* byte span of this value in the source text */
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

/* ---- text buffer ----------------------------------------------------------------------------
 * Growable NUL-terminated text buffer (zero-initialise it). On allocation failure `failed` is set
 * and later appends are ignored; check it once at the end. */
typedef struct fl_tbuf {
    char *data;
    size_t len;
    size_t cap;
    int failed;
} fl_tbuf;

void fl_tbuf_append(fl_tbuf *b, const char *s, size_t n);
void fl_tbuf_puts(fl_tbuf *b, const char *s);
void fl_tbuf_printf(fl_tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append `s` (n bytes) as a quoted JSON string: \" \\ \n \r \t, other bytes below 0x20 as
 * \u00XX, everything else (well-formed UTF-8, DEL) as is; a byte that is not part of well-formed
 * UTF-8 is written as \u00XX, its Latin-1 reading, so the text is valid JSON whatever the
 * names' bytes (the same in the builder). (The builder below also writes \b, \f and DEL
 * escaped; the two styles are kept apart so manifests and --json outputs stay byte for byte.) */
void fl_tbuf_json_string(fl_tbuf *b, const char *s, size_t n);
void fl_tbuf_free(fl_tbuf *b);

/* ---- JSON text builder -----------------------------------------------------------------------
 * Builds JSON text in an fl_tbuf, inserting commas itself. Strings are escaped per RFC 8259
 * (\" \\ \n \r \t \b \f, other control characters and DEL as \u00XX; well-formed UTF-8
 * passed through, any other byte as \u00XX).
 * Usage:
 *     fl_json j; fl_json_init(&j);
 *     fl_json_begin_object(&j);
 *     fl_json_key(&j, "records"); fl_json_uint(&j, 70000);
 *     fl_json_key(&j, "classes"); fl_json_begin_array(&j); fl_json_string(&j, "T-shirt"); ...
 *     fl_json_end_array(&j);
 *     fl_json_end_object(&j);
 *     puts(fl_json_text(&j)); fl_json_free(&j);
 * On allocation failure the writer latches an error (fl_json_failed) and further calls are
 * ignored. Nesting is limited to 32 levels. */
typedef struct fl_json {
    fl_tbuf text; /* the text so far; text.failed latches errors */
    int depth;
    unsigned char need_comma[32]; /* per nesting level: a value was already written */
    unsigned char after_key;      /* a key was just written: no comma before the value */
} fl_json;

void fl_json_init(fl_json *j);
void fl_json_free(fl_json *j);
/* The text so far, NUL-terminated (never NULL; "" when empty or failed). */
const char *fl_json_text(const fl_json *j);
int fl_json_failed(const fl_json *j);
void fl_json_begin_object(fl_json *j);
void fl_json_end_object(fl_json *j);
void fl_json_begin_array(fl_json *j);
void fl_json_end_array(fl_json *j);
void fl_json_key(fl_json *j, const char *key);
void fl_json_string(fl_json *j, const char *s);
/* A string of `len` bytes (may contain NUL, escaped as \u0000). */
void fl_json_string_n(fl_json *j, const char *s, size_t len);
void fl_json_int(fl_json *j, int64_t v);
void fl_json_uint(fl_json *j, uint64_t v);
/* Finite doubles printed with up to 6 significant digits (%.6g); NaN/Inf become null. */
void fl_json_double(fl_json *j, double v);
void fl_json_bool(fl_json *j, int v);
void fl_json_null(fl_json *j);
/* Insert pre-formatted JSON text as one value (the caller vouches it is valid). */
void fl_json_raw(fl_json *j, const char *json_text);

/* Write `s` (len bytes) as a quoted, escaped JSON string to `out`. */
void fl_json_fputs(FILE *out, const char *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif
