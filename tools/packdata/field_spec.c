/* field_spec.c — `--field NAME:TYPE[:SHAPE]` for CSV and JSON Lines sources: the spec's parse
 * into a schema field (with an image field, or none under --no-image), and one cell (CSV text)
 * or JSON value into the item's pd_value, checked against the field (type, count, shape, dtype)
 * with a reason the caller puts after the line. */
#include "packdata.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fl_json.h"

/* "3x4", "3,4" or "3" into shape; returns ndim, 0 when malformed. */
static uint32_t parse_shape(const char *s, uint32_t *shape)
{
    uint32_t n = 0;
    while (*s) {
        char *e;
        unsigned long v = strtoul(s, &e, 10);
        if (e == s || v == 0 || v > 0x7fffffff || n == FL_MAX_DIMS)
            return 0;
        shape[n++] = (uint32_t)v;
        s = e;
        if (*s == 'x' || *s == ',')
            s++;
        else if (*s)
            return 0;
    }
    return n;
}

int pd_field_spec_add(pd_items *it, const char *spec, char *why, size_t cap)
{
    char buf[256];
    if (strlen(spec) >= sizeof buf)
        return snprintf(why, cap, "--field '%.40s...' is too long", spec), -1;
    strcpy(buf, spec);
    char *name = buf, *type = strchr(buf, ':');
    if (!type)
        return snprintf(why, cap, "--field '%s' wants NAME:TYPE[:SHAPE]", spec), -1;
    *type++ = 0;
    char *rest = strchr(type, ':');
    if (rest)
        *rest++ = 0;
    fl_field_type t;
    if (fl_field_type_from_name(type, &t) || t == FL_FIELD_IMAGE)
        return snprintf(why, cap,
                        "--field '%s': type '%s' is not one of int, int_list, float, "
                        "float_vector:N, boxes, mask[:uint16], ndarray:DTYPE:SHAPE, bytes, text",
                        spec, type),
               -1;
    uint32_t shape[FL_MAX_DIMS] = {0}, ndim = 0;
    fl_dtype dt = fl_field_type_dtype(t);
    int32_t of = -1; /* the field this one's rows belong to (MASK: the image; INT_LIST: of=) */
    if (t == FL_FIELD_FLOAT_VECTOR) {
        if (!rest || (ndim = parse_shape(rest, shape)) != 1)
            return snprintf(why, cap,
                            "--field '%s': float_vector wants its length, e.g. %s:float_vector:128",
                            spec, name),
                   -1;
    } else if (t == FL_FIELD_NDARRAY) {
        char *sh = rest ? strchr(rest, ':') : NULL;
        if (sh)
            *sh++ = 0;
        if (!rest || fl_dtype_from_name(rest, &dt) || !sh || !(ndim = parse_shape(sh, shape)))
            return snprintf(why, cap,
                            "--field '%s': ndarray wants DTYPE:SHAPE, e.g. %s:ndarray:float32:3x4",
                            spec, name),
                   -1;
    } else if (t == FL_FIELD_MASK) {
        dt = FL_DTYPE_U8;
        if (rest && fl_dtype_from_name(rest, &dt))
            return snprintf(why, cap, "--field '%s': mask wants uint8 or uint16", spec), -1;
    } else if (t == FL_FIELD_INT_LIST && rest) {
        /* of=BOXES: one value per box of that field (a box's class), so that a crop dropping
         * a box drops its value too */
        of = strncmp(rest, "of=", 3) ? -1 : fl_fields_find(it->fields, it->num_fields, rest + 3);
        if (of < 0 || it->fields[of].type != FL_FIELD_BOXES)
            return snprintf(
                       why, cap,
                       "--field '%s': int_list takes only of=BOXES, naming a boxes field "
                       "given before it (e.g. --field boxes:boxes --field %s:int_list:of=boxes)",
                       spec, name),
                   -1;
    } else if (rest) {
        return snprintf(why, cap, "--field '%s': %s takes no shape", spec, type), -1;
    }
    if (fl_fields_find(it->fields, it->num_fields, name) >= 0)
        return snprintf(why, cap, "--field '%s': a field called '%s' is already there", spec, name),
               -1;
    if (t == FL_FIELD_MASK)
        of = fl_fields_image_index(it->fields, it->num_fields);
    if (pd_items_add_field(it, name, t, dt, ndim, shape, of) < 0)
        return snprintf(why, cap, "too many fields (at most %d)", FL_MAX_FIELDS), -1;
    return 0;
}

/* Numbers of a JSON value, flattened (nested lists row-major), into `out` as `dt`. Returns the
 * count, or -1 with why (not numbers, a value that does not fit, more than `max`). */
static long json_numbers(const fl_jnode *n, fl_dtype dt, void *out, size_t max, size_t at,
                         char *why, size_t cap)
{
    if (n->type == FL_J_ARRAY) {
        size_t k = at;
        for (const fl_jnode *c = n->child; c; c = c->next) {
            long r = json_numbers(c, dt, out, max, k, why, cap);
            if (r < 0)
                return r;
            k = (size_t)r;
        }
        return (long)k;
    }
    if (n->type != FL_J_NUMBER)
        return snprintf(why, cap, "holds a value that is not a number"), -1;
    if (at >= max)
        return snprintf(why, cap, "has more values than its shape holds"), -1;
    double v = n->dval;
    int is_int = dt != FL_DTYPE_F16 && dt != FL_DTYPE_F32 && dt != FL_DTYPE_F64;
    if (is_int && !n->is_int)
        return snprintf(why, cap, "holds %g, not an integer", v), -1;
    int64_t iv = n->ival;
    switch (dt) {
    case FL_DTYPE_U8:
        if (iv < 0 || iv > 255)
            goto range;
        ((uint8_t *)out)[at] = (uint8_t)iv;
        break;
    case FL_DTYPE_I8:
        if (iv < -128 || iv > 127)
            goto range;
        ((int8_t *)out)[at] = (int8_t)iv;
        break;
    case FL_DTYPE_U16:
        if (iv < 0 || iv > 65535)
            goto range;
        ((uint16_t *)out)[at] = (uint16_t)iv;
        break;
    case FL_DTYPE_I16:
        if (iv < -32768 || iv > 32767)
            goto range;
        ((int16_t *)out)[at] = (int16_t)iv;
        break;
    case FL_DTYPE_I32:
        if (iv < INT32_MIN || iv > INT32_MAX)
            goto range;
        ((int32_t *)out)[at] = (int32_t)iv;
        break;
    case FL_DTYPE_I64: ((int64_t *)out)[at] = iv; break;
    case FL_DTYPE_F32:
        if (!isfinite(v) || fabs(v) > 3.4028234663852886e38)
            goto range;
        ((float *)out)[at] = (float)v;
        break;
    case FL_DTYPE_F64: ((double *)out)[at] = v; break;
    default:
        return snprintf(why, cap, "dtype %s cannot be written from JSON (give a .npy file)",
                        fl_dtype_name(dt)),
               -1;
    }
    return (long)at + 1;
range:
    return snprintf(why, cap, "holds %g, which does not fit %s", v, fl_dtype_name(dt)), -1;
}

/* A value given as a file path (relative to root) into v. */
static int as_path(pd_items *it, const char *root, const char *s, pd_value *v, char *why,
                   size_t cap)
{
    if (!*s)
        return snprintf(why, cap, "is an empty path"), -1;
    char *p = s[0] == '/' ? strdup(s) : pd_path_join(root, s);
    if (!p)
        return -ENOMEM;
    v->kind = PD_VAL_FILE;
    v->path = pd_items_strdup(it, p);
    free(p);
    return v->path ? 0 : -ENOMEM;
}

int pd_field_value_json(pd_items *it, const fl_field *f, const fl_jnode *n, const char *root,
                        pd_value *v, char *why, size_t cap)
{
    memset(v, 0, sizeof *v);
    size_t max = 0, esize = fl_dtype_size(f->dtype);
    switch (f->type) {
    case FL_FIELD_INT:
    case FL_FIELD_FLOAT:
        if (n->type != FL_J_NUMBER)
            return snprintf(why, cap, "is not a number"), -1;
        max = 1;
        break;
    case FL_FIELD_INT_LIST:
    case FL_FIELD_FLOAT_VECTOR:
        if (n->type != FL_J_ARRAY)
            return snprintf(why, cap, "is not a list of numbers"), -1;
        for (const fl_jnode *c = n->child; c; c = c->next)
            if (c->type != FL_J_NUMBER)
                return snprintf(why, cap, "holds a value that is not a number"), -1;
        max = n->count;
        if (f->type == FL_FIELD_FLOAT_VECTOR && n->count != f->shape[0])
            return snprintf(why, cap, "has %zu values, the field holds %u", n->count, f->shape[0]),
                   -1;
        break;
    case FL_FIELD_BOXES:
        if (n->type != FL_J_ARRAY)
            return snprintf(why, cap, "is not a list of [x0, y0, x1, y1] boxes"), -1;
        for (const fl_jnode *c = n->child; c; c = c->next)
            if (c->type != FL_J_ARRAY || c->count != 4)
                return snprintf(why, cap, "holds a box that is not [x0, y0, x1, y1]"), -1;
        max = n->count * 4;
        break;
    case FL_FIELD_NDARRAY:
        if (n->type == FL_J_STRING)
            return as_path(it, root, n->str, v, why, cap);
        if (n->type != FL_J_ARRAY)
            return snprintf(why, cap, "is neither a .npy path nor a nested list"), -1;
        max = (size_t)fl_field_elements(f);
        break;
    case FL_FIELD_MASK:
    case FL_FIELD_BYTES:
        if (n->type != FL_J_STRING)
            return snprintf(why, cap, "is not a file path"), -1;
        return as_path(it, root, n->str, v, why, cap);
    case FL_FIELD_TEXT:
        if (n->type != FL_J_STRING)
            return snprintf(why, cap, "is not a string"), -1;
        v->kind = PD_VAL_DATA;
        v->count = (uint32_t)n->str_len;
        v->len = n->str_len;
        v->data = pd_items_memdup(it, n->str, n->str_len);
        return v->data ? 0 : -ENOMEM;
    default: return snprintf(why, cap, "has a type --field does not take"), -1;
    }
    void *buf = pd_items_memdup(it, NULL, max * esize);
    if (!buf)
        return -ENOMEM;
    long got = json_numbers(n, f->dtype, buf, max, 0, why, cap);
    if (got < 0)
        return -1;
    if (f->type == FL_FIELD_NDARRAY && (size_t)got != max)
        return snprintf(why, cap, "has %ld values, its shape holds %zu", got, max), -1;
    v->kind = max ? PD_VAL_DATA : PD_VAL_NONE;
    v->data = buf;
    v->len = max * esize;
    v->count = f->type == FL_FIELD_BOXES ? (uint32_t)(max / 4) : (uint32_t)max;
    if (f->type == FL_FIELD_NDARRAY || f->type == FL_FIELD_INT || f->type == FL_FIELD_FLOAT)
        v->count = 1;
    return 0;
}

int pd_field_value_text(pd_items *it, const fl_field *f, const char *s, const char *root,
                        pd_value *v, char *why, size_t cap)
{
    memset(v, 0, sizeof *v);
    while (*s == ' ')
        s++;
    if (f->type == FL_FIELD_TEXT) {
        size_t l = strlen(s);
        v->kind = PD_VAL_DATA;
        v->count = (uint32_t)l;
        v->len = l;
        v->data = pd_items_memdup(it, s, l);
        return v->data ? 0 : -ENOMEM;
    }
    if (f->type == FL_FIELD_MASK || f->type == FL_FIELD_BYTES ||
        (f->type == FL_FIELD_NDARRAY && *s != '['))
        return as_path(it, root, s, v, why, cap);
    /* numbers: JSON text, or (lists) numbers separated by spaces */
    char *tmp = NULL;
    int list = f->type == FL_FIELD_INT_LIST || f->type == FL_FIELD_FLOAT_VECTOR;
    if (list && *s != '[') {
        size_t l = strlen(s);
        tmp = malloc(l + 3);
        if (!tmp)
            return -ENOMEM;
        char *o = tmp;
        *o++ = '[';
        int first = 1;
        for (const char *p = s; *p;) {
            while (*p == ' ' || *p == '\t')
                p++;
            if (!*p)
                break;
            if (!first)
                *o++ = ',';
            first = 0;
            while (*p && *p != ' ' && *p != '\t')
                *o++ = *p++;
        }
        *o++ = ']';
        *o = 0;
        s = tmp;
    }
    if (!*s) {
        free(tmp);
        return snprintf(why, cap, "is empty"), -1;
    }
    fl_jdoc *doc = NULL;
    fl_error e;
    int r = fl_jparse(s, strlen(s), "value", &doc, &e);
    free(tmp);
    if (r == -ENOMEM)
        return r;
    if (r)
        return snprintf(why, cap, "is not %s",
                        list                        ? "a list of numbers"
                        : f->type == FL_FIELD_BOXES ? "a JSON list of boxes"
                                                    : "a number"),
               -1;
    r = pd_field_value_json(it, f, fl_jroot(doc), root, v, why, cap);
    fl_jfree(doc);
    return r;
}

int pd_fields_check_row(const pd_items *it, const pd_value *values, char *why, size_t cap)
{
    for (uint32_t f = 0; f < it->num_fields; f++) {
        const fl_field *fd = &it->fields[f];
        if (fd->type != FL_FIELD_INT_LIST || fd->of < 0)
            continue;
        const pd_value *v = &values[f], *b = &values[fd->of];
        uint32_t n = v->kind == PD_VAL_DATA ? v->count : 0,
                 nb = b->kind == PD_VAL_DATA ? b->count : 0;
        if (n != nb)
            return snprintf(why, cap,
                            "field %s has %u value%s but field %s (its of=) has %u box%s: one "
                            "value per box",
                            fd->name, n, n == 1 ? "" : "s", it->fields[fd->of].name, nb,
                            nb == 1 ? "" : "es"),
                   -1;
    }
    return 0;
}

int pd_fields_begin(pd_items *it, const pd_source_opts *so, int with_label, char *why, size_t cap)
{
    it->num_fields = 0;
    if (!so->no_image)
        pd_items_add_field(it, "image", FL_FIELD_IMAGE, FL_DTYPE_U8, 0, NULL, -1);
    if (with_label)
        pd_items_add_field(it, "label", FL_FIELD_INT, FL_DTYPE_I32, 0, NULL, -1);
    for (uint32_t i = 0; i < so->n_field_specs; i++) {
        if (pd_field_spec_add(it, so->field_specs[i], why, cap))
            return -1;
        const fl_field *f = &it->fields[it->num_fields - 1];
        if (so->no_image && (f->type == FL_FIELD_MASK || f->type == FL_FIELD_BOXES))
            return snprintf(why, cap,
                            "--field '%s': a %s is in an image's pixels, and --no-image "
                            "records have no image",
                            so->field_specs[i], fl_field_type_name(f->type)),
                   -1;
    }
    fl_error e;
    if (fl_fields_validate(it->fields, it->num_fields, &e))
        return snprintf(why, cap, "%s", e.msg), -1;
    return 0;
}
