/* inspect_fields.c — the record fields of a packed dataset for `packdata info`, `verify --decode`
 * and `extract`: the schema described, each record's fields checked to the last pixel, and
 * written out as files a user opens with ordinary tools (JSON, PNG, .npy, the raw bytes). */
#include "inspect_fields.h"

#include "packdata.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fl_file.h"
#include "fl_image.h"
#include "fl_json.h"

void pd_field_describe(const fl_field *fields, uint32_t n, uint32_t i, char *out, size_t cap)
{
    const fl_field *f = &fields[i];
    size_t o = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (o < cap)                                                                               \
            o += (size_t)snprintf(out + o, cap - o, __VA_ARGS__);                                  \
    } while (0)
    PUT("%-12s %-8s", fl_field_type_name(f->type),
        fl_dtype_name(f->dtype ? f->dtype : FL_DTYPE_U8));
    if (f->type == FL_FIELD_BOXES)
        PUT("  [N,4]");
    if (f->ndim) {
        PUT("  [");
        for (uint32_t k = 0; k < f->ndim; k++)
            PUT("%s%u", k ? "," : "", f->shape[k]);
        PUT("]");
    }
    if (fl_field_is_variable(f->type))
        PUT("  max_count %u", f->max_count);
    if (f->of >= 0 && (uint32_t)f->of < n)
        PUT("  of %s", fields[f->of].name);
    if (f->type == FL_FIELD_MASK)
        PUT("  codec %s", f->codec == FL_MASK_ZSTD ? "zstd" : "png");
    if ((int)i == fl_fields_label_index(fields, n))
        PUT("  (the label: index entry)");
#undef PUT
}

void pd_fields_json(fl_json *j, const fl_field *fields, uint32_t n)
{
    fl_json_begin_array(j);
    for (uint32_t i = 0; i < n; i++) {
        const fl_field *f = &fields[i];
        fl_json_begin_object(j);
        fl_json_key(j, "name");
        fl_json_string(j, f->name);
        fl_json_key(j, "type");
        fl_json_string(j, fl_field_type_name(f->type));
        fl_json_key(j, "dtype");
        fl_json_string(j, fl_dtype_name(f->dtype ? f->dtype : FL_DTYPE_U8));
        if (f->ndim) {
            fl_json_key(j, "shape");
            fl_json_begin_array(j);
            for (uint32_t k = 0; k < f->ndim; k++)
                fl_json_uint(j, f->shape[k]);
            fl_json_end_array(j);
        }
        if (fl_field_is_variable(f->type)) {
            fl_json_key(j, "max_count");
            fl_json_uint(j, f->max_count);
        }
        if (f->of >= 0 && (uint32_t)f->of < n) {
            fl_json_key(j, "of");
            fl_json_string(j, fields[f->of].name);
        }
        if (f->type == FL_FIELD_MASK) {
            fl_json_key(j, "codec");
            fl_json_string(j, f->codec == FL_MASK_ZSTD ? "zstd" : "png");
        }
        fl_json_end_object(j);
    }
    fl_json_end_array(j);
}

void pd_fields_scratch_free(pd_fields_scratch *s)
{
    free(s->buf);
    free(s->enc);
    memset(s, 0, sizeof *s);
}

static int grow(pd_fields_scratch *s, size_t need)
{
    if (need <= s->cap)
        return 0;
    uint8_t *b = realloc(s->buf, need);
    if (!b)
        return -ENOMEM;
    s->buf = b;
    s->cap = need;
    return 0;
}

/* "shard-00000.fls record 17 (source x.jpg)" */
static void record_what(const fl_dataset *ds, uint64_t i, char *out, size_t cap)
{
    size_t nl = 0;
    const char *name = fl_dataset_record_name(ds, i, &nl);
    snprintf(out, cap, "record %" PRIu64 " (source %.*s)", i, (int)(nl > 300 ? 300 : nl),
             name ? name : "?");
}

/* Parse record i's field block into vals and read its size (ri) and its name for messages
 * (what). Returns 0 or the error of fl_dataset_record_fields / fl_dataset_record_info. */
static int record_fields(const fl_dataset *ds, uint64_t i, const uint8_t *data, size_t len,
                         fl_field_value vals[FL_MAX_FIELDS], fl_record_info *ri, char *what,
                         size_t what_cap, fl_error *err)
{
    int r = fl_dataset_record_fields(ds, i, data, len, vals, err);
    if (r)
        return r;
    if ((r = fl_dataset_record_info(ds, i, ri, err)))
        return r;
    record_what(ds, i, what, what_cap);
    return 0;
}

/* Decode mask field k of a record into s->buf (height x width elements). */
static int decode_mask(const fl_field *f, const fl_field_value *v, uint32_t h, uint32_t w,
                       pd_fields_scratch *s, const char *what, fl_error *err)
{
    size_t elem = f->dtype == FL_DTYPE_U16 ? 2 : 1;
    size_t need = (size_t)h * w * elem;
    if (grow(s, need ? need : 1))
        return fl_error_set(err, -ENOMEM, "out of memory");
    char m[400];
    snprintf(m, sizeof m, "%s: field %s", what, f->name);
    return fl_mask_decode(v->data, v->len, f->codec ? f->codec : FL_MASK_PNG, w, h, f->dtype,
                          s->buf, s->cap, m, err);
}

int pd_fields_check(const fl_dataset *ds, uint64_t i, const uint8_t *data, size_t len,
                    pd_fields_scratch *s, fl_error *err)
{
    uint32_t n = fl_dataset_num_fields(ds);
    const fl_field *fs = fl_dataset_fields(ds);
    fl_field_value vals[FL_MAX_FIELDS];
    fl_record_info ri;
    char what[400];
    int r = record_fields(ds, i, data, len, vals, &ri, what, sizeof what, err);
    if (r)
        return r;
    for (uint32_t k = 0; k < n; k++) {
        const fl_field *f = &fs[k];
        if (!fl_field_in_block(fs, n, k))
            continue;
        if (f->type == FL_FIELD_NDARRAY) {
            size_t nb = fl_field_ndarray_bytes(f);
            if (grow(s, nb ? nb : 1))
                return fl_error_set(err, -ENOMEM, "out of memory");
            if ((r = fl_dataset_ndarray(ds, k, &vals[k], s->buf, s->cap, err)))
                return r;
        } else if (f->type == FL_FIELD_MASK) {
            if ((r = decode_mask(f, &vals[k], ri.height, ri.width, s, what, err)))
                return r;
        }
    }
    return 0;
}

int pd_write_output(const char *path, const void *d, size_t n, int replace)
{
    int fd = STDOUT_FILENO;
    if (strcmp(path, "-")) {
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST) {
            struct stat st;
            if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
                fd = open(path, O_WRONLY | O_CLOEXEC); /* a device or FIFO: written as it is */
            else if (replace)
                fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
            else
                return -EEXIST;
        }
        if (fd < 0)
            return -errno;
    }
    int e = fl_write_all(fd, d, n);
    if (fd != STDOUT_FILENO && close(fd) && !e)
        e = -errno;
    return e;
}

const char *pd_write_why(int r)
{
    return r == -EEXIST ? "a file of that name exists, and extract replaces no file it named "
                          "itself (choose the name with -o, or pass --force to replace it)"
                        : strerror(-r);
}

/* A float32 as JSON text that reads back to the same float (9 significant digits). */
static void json_f32(fl_json *j, const uint8_t *p)
{
    float x;
    memcpy(&x, p, 4);
    char b[40];
    if (x != x || x - x != 0) {
        fl_json_null(j);
        return;
    }
    snprintf(b, sizeof b, "%.9g", (double)x);
    fl_json_raw(j, b);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int32_t rd_i32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

int pd_fields_extract(const fl_dataset *ds, uint64_t i, const uint8_t *data, size_t len,
                      const char *prefix, const char *image_file, int replace, pd_fields_scratch *s,
                      FILE *log, fl_error *err)
{
    uint32_t n = fl_dataset_num_fields(ds);
    const fl_field *fs = fl_dataset_fields(ds);
    fl_field_value vals[FL_MAX_FIELDS];
    fl_record_info ri;
    char what[400];
    int r = record_fields(ds, i, data, len, vals, &ri, what, sizeof what, err);
    if (r)
        return r;
    size_t nl = 0;
    const char *name = fl_dataset_record_name(ds, i, &nl);

    fl_json j;
    fl_json_init(&j);
    fl_json_begin_object(&j);
    fl_json_key(&j, "index");
    fl_json_uint(&j, i);
    fl_json_key(&j, "name");
    fl_json_string_n(&j, name ? name : "", name ? nl : 0);
    fl_json_key(&j, "height");
    fl_json_uint(&j, ri.height);
    fl_json_key(&j, "width");
    fl_json_uint(&j, ri.width);
    char *path = NULL;
    for (uint32_t k = 0; k < n && !r; k++) {
        const fl_field *f = &fs[k];
        const fl_field_value *v = &vals[k];
        const uint8_t *p = v->data;
        if (f->type == FL_FIELD_IMAGE) {
            fl_json_key(&j, f->name);
            if (image_file)
                fl_json_string(&j, base_name(image_file));
            else
                fl_json_null(&j);
            continue;
        }
        fl_json_key(&j, f->name);
        switch (f->type) {
        case FL_FIELD_INT: fl_json_int(&j, rd_i32(p)); break;
        case FL_FIELD_FLOAT: json_f32(&j, p); break;
        case FL_FIELD_INT_LIST:
            fl_json_begin_array(&j);
            for (uint32_t e = 0; e < v->count; e++)
                fl_json_int(&j, rd_i32(p + 4 * (size_t)e));
            fl_json_end_array(&j);
            break;
        case FL_FIELD_FLOAT_VECTOR:
            fl_json_begin_array(&j);
            for (uint32_t e = 0; e < v->count; e++)
                json_f32(&j, p + 4 * (size_t)e);
            fl_json_end_array(&j);
            break;
        case FL_FIELD_BOXES:
            fl_json_begin_array(&j);
            for (uint32_t b = 0; b < v->count; b++) {
                fl_json_begin_array(&j);
                for (int c = 0; c < 4; c++)
                    json_f32(&j, p + 16 * (size_t)b + 4 * (size_t)c);
                fl_json_end_array(&j);
            }
            fl_json_end_array(&j);
            break;
        default: {
            /* a field of its own file */
            const char *ext = f->type == FL_FIELD_MASK      ? "png"
                              : f->type == FL_FIELD_NDARRAY ? "npy"
                              : f->type == FL_FIELD_TEXT    ? "txt"
                                                            : "bin";
            free(path);
            if (asprintf(&path, "%s.%s.%s", prefix, f->name, ext) < 0) {
                path = NULL;
                r = fl_error_set(err, -ENOMEM, "out of memory");
                break;
            }
            if (f->type == FL_FIELD_MASK) {
                const void *out = v->data;
                size_t out_len = v->len;
                if (f->codec == FL_MASK_ZSTD) {
                    /* stored as zstd: decoded and written as the PNG a user can open */
                    if ((r = decode_mask(f, v, ri.height, ri.width, s, what, err)))
                        break;
                    if ((r = fl_mask_encode(s->buf, ri.width, ri.height, f->dtype, FL_MASK_PNG, 0,
                                            &s->enc, &s->enc_cap, &out_len, err)))
                        break;
                    out = s->enc;
                }
                r = pd_write_output(path, out, out_len, replace);
            } else if (f->type == FL_FIELD_NDARRAY) {
                size_t nb = fl_field_ndarray_bytes(f);
                char hdr[256];
                uint64_t shape[FL_MAX_DIMS];
                for (uint32_t d = 0; d < f->ndim; d++)
                    shape[d] = f->shape[d];
                size_t hl = pd_npy_header(f->dtype, f->ndim, shape, hdr, sizeof hdr);
                if (!hl) {
                    r = fl_error_set(err, FL_E_UNSUPPORTED, "%s: field %s: no .npy header for %s",
                                     what, f->name, fl_dtype_name(f->dtype));
                    break;
                }
                if (grow(s, hl + nb)) {
                    r = fl_error_set(err, -ENOMEM, "out of memory");
                    break;
                }
                memcpy(s->buf, hdr, hl);
                if ((r = fl_dataset_ndarray(ds, k, v, s->buf + hl, s->cap - hl, err)))
                    break;
                r = pd_write_output(path, s->buf, hl + nb, replace);
            } else {
                r = pd_write_output(path, v->data, v->len, replace);
            }
            if (r) {
                fl_error_set(err, r, "%s: cannot write: %s", path, pd_write_why(r));
                break;
            }
            fl_json_string(&j, base_name(path)); /* beside the JSON file */
            if (log)
                fprintf(log, PD_TOOL ":   %s -> %s\n", f->name, path);
            break;
        }
        }
    }
    fl_json_end_object(&j);
    if (!r && fl_json_failed(&j))
        r = fl_error_set(err, -ENOMEM, "out of memory");
    if (!r) {
        free(path);
        if (asprintf(&path, "%s.json", prefix) < 0) {
            path = NULL;
            r = fl_error_set(err, -ENOMEM, "out of memory");
        } else {
            const char *t = fl_json_text(&j);
            size_t tl = strlen(t);
            char *tn = malloc(tl + 1);
            if (!tn) {
                r = fl_error_set(err, -ENOMEM, "out of memory");
            } else {
                memcpy(tn, t, tl);
                tn[tl] = '\n';
                r = pd_write_output(path, tn, tl + 1, replace);
                free(tn);
                if (r)
                    fl_error_set(err, r, "%s: cannot write: %s", path, pd_write_why(r));
                else if (log)
                    fprintf(log, PD_TOOL ":   fields -> %s\n", path);
            }
        }
    }
    free(path);
    fl_json_free(&j);
    return r;
}
