/* fields.c — the record schema (fl_fields.h): names and types of fields, schema checks, and the
 * fields block a record carries after its payload: encoded by writers, parsed (untrusted bytes,
 * every length bounds-checked) by readers. Layout: SPEC.md, "Fields". */
#include "fl_fields.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

static const char *const type_names[] = {NULL,      "image",        "int",   "int_list",
                                         "float",   "float_vector", "boxes", "mask",
                                         "ndarray", "bytes",        "text"};
static const char *const dtype_names[] = {NULL,    "uint8", "int8",    "uint16",  "int16",
                                          "int32", "int64", "float16", "float32", "float64"};
static const size_t dtype_sizes[] = {0, 1, 1, 2, 2, 4, 8, 2, 4, 8};

#define NTYPES  (sizeof type_names / sizeof type_names[0])
#define NDTYPES (sizeof dtype_names / sizeof dtype_names[0])

size_t fl_dtype_size(fl_dtype t) { return (unsigned)t < NDTYPES ? dtype_sizes[t] : 0; }

const char *fl_dtype_name(fl_dtype t)
{
    return (unsigned)t > 0 && (unsigned)t < NDTYPES ? dtype_names[t] : "unknown";
}

int fl_dtype_from_name(const char *s, fl_dtype *out)
{
    for (unsigned i = 1; s && i < NDTYPES; i++)
        if (!strcmp(s, dtype_names[i])) {
            *out = (fl_dtype)i;
            return 0;
        }
    return -1;
}

const char *fl_field_type_name(fl_field_type t)
{
    return (unsigned)t > 0 && (unsigned)t < NTYPES ? type_names[t] : "unknown";
}

int fl_field_type_from_name(const char *s, fl_field_type *out)
{
    for (unsigned i = 1; s && i < NTYPES; i++)
        if (!strcmp(s, type_names[i])) {
            *out = (fl_field_type)i;
            return 0;
        }
    return -1;
}

fl_dtype fl_field_type_dtype(fl_field_type t)
{
    switch (t) {
    case FL_FIELD_IMAGE:
    case FL_FIELD_BYTES:
    case FL_FIELD_TEXT: return FL_DTYPE_U8;
    case FL_FIELD_INT:
    case FL_FIELD_INT_LIST: return FL_DTYPE_I32;
    case FL_FIELD_FLOAT:
    case FL_FIELD_FLOAT_VECTOR:
    case FL_FIELD_BOXES: return FL_DTYPE_F32;
    default: return (fl_dtype)0; /* MASK, NDARRAY: the field says */
    }
}

int fl_field_is_variable(fl_field_type t)
{
    return t == FL_FIELD_INT_LIST || t == FL_FIELD_BOXES || t == FL_FIELD_BYTES ||
           t == FL_FIELD_TEXT;
}

size_t fl_field_row_bytes(const fl_field *f)
{
    switch (f->type) {
    case FL_FIELD_INT_LIST: return 4;
    case FL_FIELD_BOXES: return 16;
    case FL_FIELD_BYTES:
    case FL_FIELD_TEXT: return 1;
    default: return 0;
    }
}

uint64_t fl_field_elements(const fl_field *f)
{
    if (f->type == FL_FIELD_FLOAT_VECTOR)
        return f->shape[0];
    if (f->type != FL_FIELD_NDARRAY)
        return 1;
    uint64_t n = 1;
    for (uint32_t d = 0; d < f->ndim && d < FL_MAX_DIMS; d++)
        n *= f->shape[d];
    return n;
}

size_t fl_field_ndarray_bytes(const fl_field *f)
{
    if (f->type != FL_FIELD_NDARRAY)
        return 0;
    return (size_t)(fl_field_elements(f) * fl_dtype_size(f->dtype));
}

/* ---- schema -----------------------------------------------------------------------------------
 */

static int name_ok(const char *s)
{
    size_t n = strnlen(s, FL_MAX_FIELD_NAME + 1);
    if (n == 0 || n > FL_MAX_FIELD_NAME)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return 0;
    }
    return 1;
}

/* One field on its own (not `of`). */
static const char *field_problem(const fl_field *f)
{
    if ((unsigned)f->type == 0 || (unsigned)f->type >= NTYPES)
        return "unknown type";
    fl_dtype want = fl_field_type_dtype(f->type);
    if (want && f->dtype != want)
        return "wrong dtype for its type (see fl_field_type_dtype)";
    if (f->type == FL_FIELD_MASK && f->dtype != FL_DTYPE_U8 && f->dtype != FL_DTYPE_U16)
        return "a mask is uint8 or uint16";
    if (f->type == FL_FIELD_NDARRAY && fl_dtype_size(f->dtype) == 0)
        return "unknown dtype";
    if (f->type == FL_FIELD_MASK ? f->codec != FL_MASK_PNG && f->codec != FL_MASK_ZSTD
                                 : f->codec != 0)
        return f->type == FL_FIELD_MASK ? "a mask's codec is png or zstd"
                                        : "codec given for a non-mask field";
    uint32_t want_ndim = f->type == FL_FIELD_FLOAT_VECTOR ? 1 : 0;
    if (f->type == FL_FIELD_NDARRAY ? f->ndim < 1 || f->ndim > FL_MAX_DIMS : f->ndim != want_ndim)
        return f->type == FL_FIELD_NDARRAY ? "an ndarray has 1 to 4 dimensions"
               : want_ndim                 ? "a float_vector has a shape of 1 dimension"
                                           : "shape given for a field without one";
    uint64_t elems = 1;
    for (uint32_t d = 0; d < FL_MAX_DIMS; d++) {
        if (d < f->ndim) {
            if (f->shape[d] == 0)
                return "a dimension of size 0";
            elems *= f->shape[d];
            if (elems > (1u << 28))
                return "shape over 2^28 elements";
        } else if (f->shape[d] != 0) {
            return "shape has more entries than dimensions";
        }
    }
    if (!fl_field_is_variable(f->type) && f->max_count != 0)
        return "max_count on a fixed-size field";
    return NULL;
}

int fl_fields_validate(const fl_field *fields, uint32_t n, fl_error *err)
{
    if (!fields || n == 0)
        return fl_error_set(err, FL_E_INVALID, "fields: the schema has no fields");
    if (n > FL_MAX_FIELDS)
        return fl_error_set(err, FL_E_INVALID, "fields: %u fields, at most %u", n, FL_MAX_FIELDS);
    int image = -1;
    for (uint32_t i = 0; i < n; i++) {
        const fl_field *f = &fields[i];
        if (!name_ok(f->name))
            return fl_error_set(
                err, FL_E_INVALID,
                "field %u: bad name \"%.*s\" (1 to %u of [A-Za-z0-9_], not starting "
                "with a digit)",
                i, FL_MAX_FIELD_NAME, f->name, FL_MAX_FIELD_NAME);
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(fields[j].name, f->name))
                return fl_error_set(err, FL_E_INVALID, "field \"%s\": declared twice", f->name);
        const char *why = field_problem(f);
        if (why)
            return fl_error_set(err, FL_E_INVALID, "field \"%s\" (%s): %s", f->name,
                                fl_field_type_name(f->type), why);
        if (f->type == FL_FIELD_IMAGE) {
            if (image >= 0)
                return fl_error_set(err, FL_E_INVALID,
                                    "field \"%s\": a second image field (\"%s\" "
                                    "is the image)",
                                    f->name, fields[image].name);
            image = (int)i;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        const fl_field *f = &fields[i];
        int32_t of = f->of;
        const char *why = NULL;
        if (f->type == FL_FIELD_INT_LIST) {
            if (of != -1 && (of < 0 || (uint32_t)of >= n || fields[of].type != FL_FIELD_BOXES))
                why = "`of` must name a boxes field (or be -1)";
        } else if (f->type == FL_FIELD_MASK) {
            if (of < 0 || (uint32_t)of >= n || fields[of].type != FL_FIELD_IMAGE)
                why = "`of` must name the image field";
        } else if (of != -1) {
            why = "`of` is only for int_list and mask fields (set it to -1)";
        }
        if (!why && f->type == FL_FIELD_BOXES && image < 0)
            why = "boxes need an image field (they are in its pixels)";
        if (why)
            return fl_error_set(err, FL_E_INVALID, "field \"%s\" (%s): %s", f->name,
                                fl_field_type_name(f->type), why);
    }
    return 0;
}

int fl_fields_is_classic(const fl_field *fields, uint32_t n)
{
    return n == 2 && fields[0].type == FL_FIELD_IMAGE && fields[1].type == FL_FIELD_INT &&
           !strcmp(fields[0].name, "image") && !strcmp(fields[1].name, "label");
}

void fl_fields_classic(fl_field out[2])
{
    memset(out, 0, 2 * sizeof *out);
    strcpy(out[0].name, "image");
    out[0].type = FL_FIELD_IMAGE;
    out[0].dtype = FL_DTYPE_U8;
    out[0].of = -1;
    strcpy(out[1].name, "label");
    out[1].type = FL_FIELD_INT;
    out[1].dtype = FL_DTYPE_I32;
    out[1].of = -1;
}

static int first_of_type(const fl_field *fields, uint32_t n, fl_field_type t)
{
    for (uint32_t i = 0; fields && i < n; i++)
        if (fields[i].type == t)
            return (int)i;
    return -1;
}

int fl_fields_label_index(const fl_field *fields, uint32_t n)
{
    return first_of_type(fields, n, FL_FIELD_INT);
}

int fl_fields_image_index(const fl_field *fields, uint32_t n)
{
    return first_of_type(fields, n, FL_FIELD_IMAGE);
}

int fl_fields_find(const fl_field *fields, uint32_t n, const char *name)
{
    for (uint32_t i = 0; fields && name && i < n; i++)
        if (!strcmp(fields[i].name, name))
            return (int)i;
    return -1;
}

int fl_field_in_block(const fl_field *fields, uint32_t n, uint32_t i)
{
    if (i >= n || fields[i].type == FL_FIELD_IMAGE)
        return 0;
    return (int)i != fl_fields_label_index(fields, n);
}

size_t fl_fields_min_block(const fl_field *fields, uint32_t n)
{
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!fl_field_in_block(fields, n, i))
            continue;
        total += 4;
        const fl_field *f = &fields[i];
        if (f->type == FL_FIELD_INT || f->type == FL_FIELD_FLOAT)
            total += 4;
        else if (f->type == FL_FIELD_FLOAT_VECTOR)
            total += (size_t)f->shape[0] * 4;
    }
    return total;
}

/* ---- values -----------------------------------------------------------------------------------
 */

static int valid_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0)
            k = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0)
            k = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0)
            k = 3, cp = c & 0x07, min = 0x10000;
        else
            return 0;
        if (k > n - i - 1)
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

static float rdf32(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

static uint32_t rdbe32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A mask's stored bytes: PNG (signature, IHDR of a gray image of the dtype's depth: its size goes
 * to *h and *w) or one zstd frame whose header says its decompressed size (*h = *w = 0, *raw set).
 * Returns NULL or why not. */
/* A mask is of its image's size, and no image over the decoders' 100 megapixels decodes: a larger
 * mask (a 110 KB zstd frame can claim 3.6 GB) is refused before a loader allocates for it. */
#define FL_MAX_MASK_PIXELS 100000000u
#define MASK_TOO_LARGE     "mask over 100 megapixels (no image that large decodes): damaged or crafted"

static const char *mask_header(const fl_field *f, const uint8_t *p, size_t len, uint32_t *h,
                               uint32_t *w, uint64_t *raw)
{
    *h = *w = 0;
    *raw = 0;
    if (f->codec == FL_MASK_PNG) {
        if (len < 33 || memcmp(p, "\x89PNG\r\n\x1a\n", 8) != 0 || rdbe32(p + 8) != 13 ||
            memcmp(p + 12, "IHDR", 4) != 0)
            return "not a PNG image";
        uint8_t depth = p[24], color = p[25];
        if (color != 0)
            return "PNG mask is not grayscale";
        if (f->dtype == FL_DTYPE_U16 ? depth != 16 : depth > 8) /* 1, 2, 4 or 8 bits for uint8 */
            return f->dtype == FL_DTYPE_U16 ? "uint16 mask PNG is not 16-bit"
                                            : "uint8 mask PNG is 16-bit";
        *w = rdbe32(p + 16);
        *h = rdbe32(p + 20);
        if (!*w || !*h || *w > (1u << 20) || *h > (1u << 20))
            return "PNG mask size out of range";
        *raw = (uint64_t)*w * *h * fl_dtype_size(f->dtype);
        if ((uint64_t)*w * *h > FL_MAX_MASK_PIXELS)
            return MASK_TOO_LARGE;
        return NULL;
    }
    unsigned long long cs = ZSTD_getFrameContentSize(p, len);
    if (cs == ZSTD_CONTENTSIZE_ERROR)
        return "not a zstd frame";
    if (cs == ZSTD_CONTENTSIZE_UNKNOWN)
        return "zstd frame without its content size";
    if (cs % fl_dtype_size(f->dtype))
        return "zstd mask size is not a whole number of elements";
    *raw = cs;
    if (cs / fl_dtype_size(f->dtype) > FL_MAX_MASK_PIXELS)
        return MASK_TOO_LARGE;
    return NULL;
}

/* Everything about value v of field i that needs no other field: sizes, finite floats, ordered
 * boxes, UTF-8, a decodable mask/ndarray header. On success fills v->count (and a PNG mask's
 * size). Returns NULL or why not. `parsing`: v->count is derived, not checked. */
static const char *value_problem(const fl_field *f, fl_field_value *v, int parsing)
{
    const uint8_t *p = v->data;
    size_t len = v->len;
    if (len && !p)
        return "no data";
    size_t row = fl_field_row_bytes(f);
    switch (f->type) {
    case FL_FIELD_INT:
    case FL_FIELD_FLOAT:
    case FL_FIELD_FLOAT_VECTOR: {
        size_t want = (size_t)fl_field_elements(f) * 4;
        if (len != want)
            return "wrong length for its type";
        if (f->type != FL_FIELD_INT)
            for (size_t k = 0; k < len; k += 4)
                if (!isfinite(rdf32(p + k)))
                    return "not a finite number (NaN or infinity)";
        v->count = (uint32_t)fl_field_elements(f);
        return NULL;
    }
    case FL_FIELD_INT_LIST:
    case FL_FIELD_BOXES:
    case FL_FIELD_BYTES:
    case FL_FIELD_TEXT:
        if (len % row)
            return "length is not a whole number of elements";
        if (len / row > UINT32_MAX)
            return "too many elements";
        if (!parsing && v->count != len / row)
            return "count does not match the length (count x element size bytes)";
        v->count = (uint32_t)(len / row);
        if (parsing && f->max_count && v->count > f->max_count)
            return "more elements than the manifest's max_count";
        if (f->type == FL_FIELD_TEXT && !valid_utf8(p, len))
            return "text is not valid UTF-8";
        if (f->type == FL_FIELD_BOXES)
            for (size_t k = 0; k < len; k += 16) {
                float x0 = rdf32(p + k), y0 = rdf32(p + k + 4), x1 = rdf32(p + k + 8),
                      y1 = rdf32(p + k + 12);
                if (!isfinite(x0) || !isfinite(y0) || !isfinite(x1) || !isfinite(y1))
                    return "a box coordinate is not finite";
                if (x0 < 0 || y0 < 0)
                    return "a box starts left of or above the image";
                if (x1 < x0 || y1 < y0)
                    return "a box has x1 < x0 or y1 < y0";
            }
        return NULL;
    case FL_FIELD_MASK: {
        uint32_t h, w;
        uint64_t raw;
        const char *why = mask_header(f, p, len, &h, &w, &raw);
        if (why)
            return why;
        if (!parsing && f->codec == FL_MASK_PNG && (h != v->height || w != v->width))
            return "the PNG's size differs from the value's height x width";
        if (!parsing && f->codec == FL_MASK_ZSTD &&
            raw != (uint64_t)v->height * v->width * fl_dtype_size(f->dtype))
            return "the zstd frame's size differs from height x width elements";
        if (parsing) {
            v->height = h;
            v->width = w;
        }
        v->count = 1;
        return NULL;
    }
    case FL_FIELD_NDARRAY: {
        unsigned long long cs = ZSTD_getFrameContentSize(p, len);
        if (cs == ZSTD_CONTENTSIZE_ERROR || cs == ZSTD_CONTENTSIZE_UNKNOWN)
            return "not a zstd frame with its content size";
        if (cs != fl_field_ndarray_bytes(f))
            return "decompressed size differs from the shape";
        v->count = (uint32_t)fl_field_elements(f);
        return NULL;
    }
    default: return "not a block field";
    }
}

int fl_fields_check_record(const fl_field *fields, uint32_t n, const fl_field_value *values,
                           uint32_t image_width, uint32_t image_height, const char *what,
                           fl_error *err)
{
    if (!what)
        what = "record";
    for (uint32_t i = 0; i < n; i++) {
        if (!fl_field_in_block(fields, n, i))
            continue;
        const fl_field *f = &fields[i];
        const fl_field_value *v = &values[i];
        const char *why = NULL;
        char buf[160];
        if (f->type == FL_FIELD_BOXES) {
            const uint8_t *p = v->data;
            for (size_t k = 0; k + 16 <= v->len && !why; k += 16)
                if (rdf32(p + k + 8) > (float)image_width ||
                    rdf32(p + k + 12) > (float)image_height) {
                    snprintf(buf, sizeof buf, "box %zu (%g, %g, %g, %g) is outside the %ux%u image",
                             k / 16, rdf32(p + k), rdf32(p + k + 4), rdf32(p + k + 8),
                             rdf32(p + k + 12), image_width, image_height);
                    why = buf;
                }
        } else if (f->type == FL_FIELD_INT_LIST && f->of >= 0 && (uint32_t)f->of < n) {
            if (v->count != values[f->of].count) {
                snprintf(buf, sizeof buf, "%u values for the %u boxes of \"%s\"", v->count,
                         values[f->of].count, fields[f->of].name);
                why = buf;
            }
        } else if (f->type == FL_FIELD_MASK) {
            uint32_t h, w;
            uint64_t raw;
            if (!mask_header(f, v->data, v->len, &h, &w, &raw) &&
                raw != (uint64_t)image_height * image_width * fl_dtype_size(f->dtype)) {
                if (h)
                    snprintf(buf, sizeof buf, "a %ux%u mask for a %ux%u image", w, h, image_width,
                             image_height);
                else
                    snprintf(buf, sizeof buf, "a mask of %llu bytes for a %ux%u image (%llu)",
                             (unsigned long long)raw, image_width, image_height,
                             (unsigned long long)image_height * image_width *
                                 fl_dtype_size(f->dtype));
                why = buf;
            }
        }
        if (why)
            return fl_error_set(err, FL_E_INVALID, "%s: field \"%s\": %s", what, f->name, why);
    }
    return 0;
}

/* ---- encode -----------------------------------------------------------------------------------
 */

static int reserve(uint8_t **out, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    uint8_t *p = realloc(*out, c);
    if (!p)
        return -ENOMEM;
    *out = p;
    *cap = c;
    return 0;
}

static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

int fl_fields_encode(const fl_field *fields, uint32_t n, const fl_field_value *values,
                     uint32_t image_width, uint32_t image_height, int level, uint8_t **out,
                     size_t *cap, size_t *len, fl_error *err)
{
    *len = 0;
    int rc = fl_fields_validate(fields, n, err);
    if (rc)
        return rc;
    fl_field_value vals[FL_MAX_FIELDS];
    memset(vals, 0, sizeof vals);
    size_t pos = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!fl_field_in_block(fields, n, i))
            continue;
        const fl_field *f = &fields[i];
        vals[i] = values[i];
        const void *src = values[i].data;
        size_t slen = values[i].len;
        if (slen && !src)
            return fl_error_set(err, FL_E_INVALID, "field \"%s\" (%s): no data for %zu bytes",
                                f->name, fl_field_type_name(f->type), slen);
        if (f->type == FL_FIELD_NDARRAY) {
            size_t want = fl_field_ndarray_bytes(f);
            if (slen != want || (want && !src))
                return fl_error_set(err, FL_E_INVALID,
                                    "field \"%s\" (ndarray): %zu bytes, its shape "
                                    "and dtype need %zu",
                                    f->name, slen, want);
            size_t bound = ZSTD_compressBound(want);
            if (reserve(out, cap, pos + 4 + bound))
                return fl_error_set(err, -ENOMEM, "field \"%s\": out of memory", f->name);
            /* a plain frame: content size in its header (checked at parse), no checksum (the
             * record's CRC32C covers it) */
            size_t z = ZSTD_compress(*out + pos + 4, bound, src, want, level);
            if (ZSTD_isError(z))
                return fl_error_set(err, FL_E_INVALID, "field \"%s\": zstd: %s", f->name,
                                    ZSTD_getErrorName(z));
            vals[i].data = *out + pos + 4;
            vals[i].len = z;
        } else {
            if (slen > UINT32_MAX)
                return fl_error_set(err, FL_E_INVALID, "field \"%s\": %zu bytes, over 4 GiB",
                                    f->name, slen);
            if (reserve(out, cap, pos + 4 + slen))
                return fl_error_set(err, -ENOMEM, "field \"%s\": out of memory", f->name);
            if (slen)
                memcpy(*out + pos + 4, src, slen);
            vals[i].data = *out + pos + 4;
        }
        const char *why = value_problem(f, &vals[i], 0);
        char buf[96];
        if (!why && f->type == FL_FIELD_MASK &&
            (vals[i].height != image_height || vals[i].width != image_width)) {
            snprintf(buf, sizeof buf, "a %ux%u mask for a %ux%u image", vals[i].width,
                     vals[i].height, image_width, image_height);
            why = buf;
        }
        if (why)
            return fl_error_set(err, FL_E_INVALID, "field \"%s\" (%s): %s", f->name,
                                fl_field_type_name(f->type), why);
        wr32(*out + pos, (uint32_t)vals[i].len);
        pos += 4 + vals[i].len;
        /* a later reserve() may move *out: re-point what was checked */
    }
    /* the checks that relate fields to each other and to the image, on the final bytes */
    size_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!fl_field_in_block(fields, n, i))
            continue;
        vals[i].data = *out + at + 4;
        at += 4 + vals[i].len;
    }
    rc = fl_fields_check_record(fields, n, vals, image_width, image_height, "record", err);
    if (rc)
        return fl_error_prefix(err, "fields");
    *len = pos;
    return 0;
}

/* ---- parse ------------------------------------------------------------------------------------
 */

int fl_fields_parse(const fl_field *fields, uint32_t n, const uint8_t *block, size_t len,
                    fl_field_value *values, const char *what, fl_error *err)
{
    if (!what)
        what = "record";
    size_t pos = 0;
    for (uint32_t i = 0; i < n; i++) {
        memset(&values[i], 0, sizeof values[i]);
        if (!fl_field_in_block(fields, n, i))
            continue;
        const fl_field *f = &fields[i];
        if (len - pos < 4)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: fields block ends before field \"%s\" "
                                "(%zu bytes, offset %zu)",
                                what, f->name, len, pos);
        uint32_t l;
        memcpy(&l, block + pos, 4);
        pos += 4;
        if (l > len - pos)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: field \"%s\": %u bytes claimed, %zu left in "
                                "the fields block",
                                what, f->name, l, len - pos);
        fl_field_value *v = &values[i];
        v->data = block + pos;
        v->len = l;
        const char *why = value_problem(f, v, 1);
        if (why)
            return fl_error_set(err, FL_E_FORMAT, "%s: field \"%s\" (%s): %s", what, f->name,
                                fl_field_type_name(f->type), why);
        pos += l;
    }
    if (pos != len)
        return fl_error_set(err, FL_E_FORMAT, "%s: fields block has %zu bytes past its last field",
                            what, len - pos);
    /* lists aligned with boxes: the loader keeps or drops their rows together */
    for (uint32_t i = 0; i < n; i++) {
        const fl_field *f = &fields[i];
        if (f->type == FL_FIELD_INT_LIST && f->of >= 0 && (uint32_t)f->of < n &&
            values[i].count != values[f->of].count)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: field \"%s\": %u values for the %u boxes of "
                                "\"%s\"",
                                what, f->name, values[i].count, values[f->of].count,
                                fields[f->of].name);
    }
    return 0;
}
