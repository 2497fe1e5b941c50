/* src_tar_wds.c — WebDataset shards: tar files whose members are grouped into samples by key
 * (the member path up to the first dot of its base name: "d/000017.seg.png" is key "d/000017",
 * extension "seg.png"), read in place. Each extension is a field named after it: jpg, jpeg, png,
 * webp → the image; cls → the int label (a decimal number, or a class name with --classes);
 * txt, json → text; npy → ndarray (dtype and shape from the .npy header, the same for every
 * sample); anything else → bytes. `--field NAME:TYPE[:SHAPE]` gives the field of extension NAME
 * another type (its member's text parsed as a CSV cell would be: int, int_list "3 7 9", float,
 * float_vector, boxes as JSON, ndarray from a .npy or a nested list, text, bytes). Images are read
 * from the tar when packed; the other fields are small and read while listing (they are held in
 * memory until the pack ends).
 * A sample without a field others have, with two images, with a field twice, with an unreadable
 * .npy or label is a bad input naming the shard and key. Shards: a brace pattern
 * (train-{000000..000009}.tar, {a,b} lists too), a folder of tar files, one tar file, or a text
 * file listing tar paths. Records are named "<shard file>/<key>". */
#include "archive_source.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "fl_image.h"

#define MAX_SHARDS 1000000
/* non-image field bytes held while packing: beyond this, refuse (say how to pack otherwise) */
#define MAX_FIELD_BYTES (2ull << 30)

/* ---- the shard list ----------------------------------------------------------------------- */

typedef struct strlist {
    char **v;
    size_t n, cap;
} strlist;

static int sl_push(strlist *l, char *s)
{
    if (!s)
        return -ENOMEM;
    if (l->n >= MAX_SHARDS) {
        free(s);
        return -E2BIG;
    }
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, nc * sizeof *v);
        if (!v) {
            free(s);
            return -ENOMEM;
        }
        l->v = v;
        l->cap = nc;
    }
    l->v[l->n++] = s;
    return 0;
}

static void sl_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Expand the first {a..b} or {x,y} of `pat` (recursively the rest). 0, -ENOMEM, -E2BIG, or
 * -EINVAL (an unclosed brace or a bad range). */
static int expand(const char *pat, strlist *out)
{
    const char *o = strchr(pat, '{');
    if (!o)
        return sl_push(out, strdup(pat));
    const char *c = strchr(o, '}');
    if (!c)
        return -EINVAL;
    size_t pre = (size_t)(o - pat);
    const char *body = o + 1;
    const char *dots = strstr(body, "..");
    char buf[4096];
    if (dots && dots < c) {
        char *e1, *e2;
        unsigned long long a = strtoull(body, &e1, 10), b = strtoull(dots + 2, &e2, 10);
        if (e1 != dots || e2 != c || b < a || b - a >= MAX_SHARDS)
            return -EINVAL;
        int width = (int)(dots - body);
        for (unsigned long long k = a; k <= b; k++) {
            if ((size_t)snprintf(buf, sizeof buf, "%.*s%0*llu%s", (int)pre, pat, width, k, c + 1) >=
                sizeof buf)
                return -EINVAL;
            int r = expand(buf, out);
            if (r)
                return r;
        }
        return 0;
    }
    for (const char *p = body; p <= c;) {
        const char *comma = memchr(p, ',', (size_t)(c - p));
        const char *end = comma ? comma : c;
        if ((size_t)snprintf(buf, sizeof buf, "%.*s%.*s%s", (int)pre, pat, (int)(end - p), p,
                             c + 1) >= sizeof buf)
            return -EINVAL;
        int r = expand(buf, out);
        if (r)
            return r;
        p = end + 1;
    }
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int shard_list(const char *spec, strlist *out, fl_error *err)
{
    int r;
    if (strchr(spec, '{')) {
        r = expand(spec, out);
        if (r == -EINVAL)
            return fl_error_set(err, FL_E_INVALID,
                                "--wds %s: a brace pattern needs {FIRST..LAST} "
                                "(numbers, zero-padded to FIRST's width) or {a,b,...}",
                                spec);
    } else {
        struct stat st;
        if (stat(spec, &st) < 0)
            return fl_error_set(err, -errno, "--wds %s: %s", spec, strerror(errno));
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(spec);
            if (!d)
                return fl_error_set(err, -errno, "--wds %s: %s", spec, strerror(errno));
            struct dirent *de;
            r = 0;
            while (!r && (de = readdir(d)))
                if (de->d_name[0] != '.' && pd_is_tar_name(de->d_name))
                    r = sl_push(out, pd_path_join(spec, de->d_name));
            closedir(d);
            if (!r && out->n)
                qsort(out->v, out->n, sizeof *out->v, cmp_str);
        } else if (pd_is_tar_name(spec)) {
            r = sl_push(out, strdup(spec));
        } else {
            /* a list of shard paths, one per line, relative to the list's folder */
            uint8_t *data;
            size_t len;
            r = pd_read_file(spec, 0, 64u << 20, &data, &len, err);
            if (r)
                return r;
            char *dir = strdup(spec), *slash = dir ? strrchr(dir, '/') : NULL;
            if (slash)
                *slash = 0;
            for (size_t i = 0; i < len && !r;) {
                size_t j = i;
                while (j < len && data[j] != '\n')
                    j++;
                size_t a = i, b = j;
                while (a < b && isspace(data[a]))
                    a++;
                while (b > a && isspace(data[b - 1]))
                    b--;
                if (b > a && data[a] != '#') {
                    char *line = strndup((const char *)data + a, b - a);
                    r = line ? sl_push(out, pd_path_join(slash ? dir : "", line)) : -ENOMEM;
                    free(line);
                }
                i = j + 1;
            }
            free(dir);
            free(data);
        }
    }
    if (r == -E2BIG)
        return fl_error_set(err, FL_E_INVALID, "--wds %s: over %d shards", spec, MAX_SHARDS);
    if (r)
        return fl_error_set(err, r, "--wds %s: out of memory", spec);
    if (!out->n)
        return fl_error_set(err, FL_E_INVALID, "--wds %s: no tar files (.tar, .tar.gz, ...)", spec);
    return 0;
}

/* ---- samples -------------------------------------------------------------------------------- */

typedef enum kind { K_IMAGE, K_LABEL, K_TEXT, K_NPY, K_BYTES, K_SPEC } kind;

typedef struct wfield {
    char ext[FL_MAX_FIELD_NAME + 1];
    kind k;
    fl_dtype dtype; /* npy */
    uint32_t ndim;
    uint64_t shape[FL_MAX_DIMS];
    uint64_t samples; /* samples that have it */
    int spec;         /* K_SPEC: index in wds.specs.fields */
} wfield;

typedef struct wpart { /* one member of a sample, other than the image */
    uint32_t field;
    const void *data; /* arena */
    size_t len;
    uint32_t count; /* K_SPEC: fl_field_value.count; others: from the type */
} wpart;

typedef struct wsample {
    const char *name;   /* "<shard>/<key>" (arena) */
    const char *source; /* "<shard path>:<key>" (arena) */
    pd_member *image;
    uint32_t image_field;
    int32_t label;
    int has_label;
    size_t part0, nparts; /* into the parts vector */
    int bad;              /* reported already */
} wsample;

typedef struct wds {
    pd_items *out;
    const pd_source_opts *so;
    pd_reject_ctx *rc;
    pd_archive *ar;
    const char *shard;      /* path */
    const char *shard_base; /* its file name */
    wfield fields[FL_MAX_FIELDS];
    uint32_t nf;
    wsample *s;
    size_t ns, cap_s;
    wpart *p;
    size_t np, cap_p;
    int open; /* s[ns - 1] is still taking members */
    char key[4096];
    uint64_t held; /* field bytes held */
    uint64_t ignored;
    int stop; /* pd_reject said fail, or out of memory (oom set) */
    int oom;
    int32_t max_label;
    pd_items specs; /* --field: the fields they declare (name, type, dtype, shape) */
    char why[600];
} wds;

static kind kind_of(const char *ext)
{
    const char *last = strrchr(ext, '.');
    last = last ? last + 1 : ext;
    if (!strcasecmp(last, "jpg") || !strcasecmp(last, "jpeg") || !strcasecmp(last, "png") ||
        !strcasecmp(last, "webp"))
        return K_IMAGE;
    if (!strcasecmp(ext, "cls"))
        return K_LABEL;
    if (!strcasecmp(last, "txt") || !strcasecmp(last, "json"))
        return K_TEXT;
    if (!strcasecmp(last, "npy"))
        return K_NPY;
    return K_BYTES;
}

/* The field name of an extension: letters, digits and _ (others become _), not starting with a
 * digit. */
static void field_name(const char *ext, char *out, size_t cap)
{
    size_t k = 0;
    if (isdigit((unsigned char)ext[0]) && k + 1 < cap)
        out[k++] = '_';
    for (const char *c = ext; *c && k + 1 < cap; c++)
        out[k++] = isalnum((unsigned char)*c) || *c == '_' ? (char)tolower((unsigned char)*c) : '_';
    out[k] = 0;
}

static int bad(wds *w, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(wds *w, const char *what, const char *fmt, ...)
{
    char why[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (pd_reject(w->rc, what, "%s", why))
        w->stop = 1;
    return w->stop;
}

static int sample_bad(wds *w, wsample *s, const char *fmt, const char *arg)
{
    if (s->bad)
        return w->stop;
    s->bad = 1;
    return bad(w, s->source, fmt, arg);
}

static int new_sample(wds *w, const char *key)
{
    if (w->ns == w->cap_s) {
        size_t nc = w->cap_s ? w->cap_s * 2 : 1024;
        wsample *v = realloc(w->s, nc * sizeof *v);
        if (!v)
            return w->oom = w->stop = 1;
        w->s = v;
        w->cap_s = nc;
    }
    wsample *s = &w->s[w->ns];
    memset(s, 0, sizeof *s);
    size_t n = strlen(w->shard_base) + strlen(key) + 2, m = strlen(w->shard) + strlen(key) + 2;
    char *name = pd_items_memdup(w->out, NULL, n), *src = pd_items_memdup(w->out, NULL, m);
    if (!name || !src)
        return w->oom = w->stop = 1;
    snprintf(name, n, "%s/%s", w->shard_base, key);
    snprintf(src, m, "%s:%s", w->shard, key);
    s->name = name;
    s->source = src;
    s->part0 = w->np;
    w->ns++;
    w->open = 1;
    snprintf(w->key, sizeof w->key, "%s", key);
    return 0;
}

static long find_field(wds *w, const char *ext, kind k)
{
    for (uint32_t i = 0; i < w->nf; i++) {
        if (k == K_IMAGE && w->fields[i].k == K_IMAGE)
            return i; /* one image field, any extension */
        if (!strcasecmp(w->fields[i].ext, ext))
            return i;
    }
    return -1;
}

/* The field a member of extension ext goes to, created at its first member (a --field of its
 * name makes it K_SPEC); -1 after reporting too many fields (*rc: what visit returns). */
static long member_field(wds *w, const char *what, const char *ext, int *rc)
{
    kind k = kind_of(ext);
    long f = find_field(w, ext, k);
    if (f >= 0)
        return f;
    if (w->nf == FL_MAX_FIELDS) {
        *rc = bad(w, what, "more than %d different extensions (fields)", FL_MAX_FIELDS);
        return -1;
    }
    f = w->nf++;
    wfield *nf = &w->fields[f];
    memset(nf, 0, sizeof *nf);
    snprintf(nf->ext, sizeof nf->ext, "%s", ext);
    nf->k = k;
    char name[FL_MAX_FIELD_NAME + 1];
    field_name(ext, name, sizeof name);
    int sp = fl_fields_find(w->specs.fields, w->specs.num_fields, name);
    if (sp >= 0 && k != K_IMAGE) {
        nf->k = K_SPEC;
        nf->spec = sp;
    }
    return f;
}

/* Whether sample s already has a member of field f (of kind k). */
static int sample_has_field(const wds *w, const wsample *s, long f, kind k)
{
    int twice = k == K_IMAGE ? s->image != NULL : k == K_LABEL ? s->has_label : 0;
    for (size_t i = s->part0; i < w->np && !twice; i++)
        twice = w->p[i].field == (uint32_t)f;
    return twice;
}

/* Records the image member: it stays in the tar and is read when packed. */
static int add_image(wds *w, wsample *s, const pd_tar_entry *e, const char *what, long f)
{
    pd_member *m = pd_items_memdup(w->out, NULL, sizeof *m);
    size_t n = strlen(what) + 1;
    char *src = m ? pd_items_memdup(w->out, what, n) : NULL;
    if (!m || !src)
        return w->oom = w->stop = 1;
    if (e->sparse)
        return sample_bad(w, s, "%s", "a sparse image member");
    m->ar = w->ar;
    m->offset = e->offset;
    m->entry = e->entry;
    m->size = e->size;
    m->source = src;
    m->ticket = UINT64_MAX;
    m->format = e->head_len >= 3 && e->head[0] == 0xFF && e->head[1] == 0xD8 ? FL_IMG_JPEG
                : e->head_len >= 8 && !memcmp(e->head, "\x89PNG", 4)         ? FL_IMG_PNG
                : e->head_len >= 12 && !memcmp(e->head + 8, "WEBP", 4)       ? FL_IMG_WEBP
                                                                             : FL_IMG_UNKNOWN;
    s->image = m;
    s->image_field = (uint32_t)f;
    return 0;
}

/* Reads a non-image member into the arena, NUL-terminated (text fields rely on it), within the
 * bound on bytes held; NULL after reporting (*rc: what visit returns). */
static uint8_t *read_member(wds *w, wsample *s, const pd_tar_entry *e, const char *ext, int *rc)
{
    if (e->size > (1u << 30)) {
        *rc = sample_bad(w, s, "its %s member is over 1 GiB", ext);
        return NULL;
    }
    w->held += e->size;
    if (w->held > MAX_FIELD_BYTES) {
        w->stop = 1;
        snprintf(w->why, sizeof w->why,
                 "the shards' non-image members add up to over %llu bytes, "
                 "which packdata holds in memory while packing: pack fewer shards at a time "
                 "(--part, or a shorter --wds list)",
                 MAX_FIELD_BYTES);
        *rc = 1;
        return NULL;
    }
    uint8_t *d = pd_items_memdup(w->out, NULL, e->size + 1); /* +1: NUL after text */
    if (!d) {
        *rc = w->oom = w->stop = 1;
        return NULL;
    }
    if (pd_tar_entry_read(e, d, w->why, sizeof w->why)) {
        *rc = sample_bad(w, s, "%s", w->why);
        return NULL;
    }
    d[e->size] = 0;
    return d;
}

static int add_part(wds *w, wsample *s, long f, const void *data, size_t len, uint32_t count)
{
    if (w->np == w->cap_p) {
        size_t nc = w->cap_p ? w->cap_p * 2 : 1024;
        wpart *v = realloc(w->p, nc * sizeof *v);
        if (!v)
            return w->oom = w->stop = 1;
        w->p = v;
        w->cap_p = nc;
    }
    w->p[w->np++] = (wpart){(uint32_t)f, data, len, count};
    s->nparts++;
    return 0;
}

static int add_label(wds *w, wsample *s, const uint8_t *d)
{
    char why[256];
    if (pd_parse_label((const char *)d, w->so, &s->label, why, sizeof why)) {
        snprintf(w->why, sizeof w->why, "cls: %s", why);
        return sample_bad(w, s, "%s", w->why);
    }
    s->has_label = 1;
    if (s->label > w->max_label)
        w->max_label = s->label;
    return 0;
}

/* A member of a --field: parsed and checked against the --field now, while the sample can be
 * named. */
static int add_spec(wds *w, wsample *s, const pd_tar_entry *e, const wfield *fd, long f,
                    const uint8_t *d, const char *ext)
{
    const fl_field *sf = &w->specs.fields[fd->spec];
    const void *data = d;
    size_t len = e->size;
    pd_value v;
    memset(&v, 0, sizeof v);
    char why[300];
    int npy = sf->type == FL_FIELD_NDARRAY && e->size >= 6 && !memcmp(d, "\x93NUMPY", 6);
    if (npy) {
        fl_dtype dt;
        uint32_t nd;
        uint64_t shape[FL_MAX_DIMS];
        const uint8_t *el;
        size_t el_len;
        why[0] = 0;
        int ok = !pd_npy_parse(d, e->size, &dt, &nd, shape, &el, &el_len, why, sizeof why);
        int same = ok && dt == sf->dtype && nd == sf->ndim;
        for (uint32_t i = 0; same && i < nd; i++)
            same = shape[i] == sf->shape[i];
        if (ok && !same)
            snprintf(why, sizeof why, "a %s array of %u dimensions, not the --field's %s shape",
                     fl_dtype_name(dt), nd, fl_dtype_name(sf->dtype));
        if (!same) {
            snprintf(w->why, sizeof w->why, "%s: %s", ext, why);
            return sample_bad(w, s, "%s", w->why);
        }
        data = el;
        len = el_len;
    } else if (sf->type != FL_FIELD_BYTES && sf->type != FL_FIELD_TEXT) {
        why[0] = 0;
        int r = pd_field_value_text(w->out, sf, (const char *)d, NULL, &v, why, sizeof why);
        if (r == -ENOMEM)
            return w->oom = w->stop = 1;
        if (r) {
            snprintf(w->why, sizeof w->why, "%s (--field %s): %s", ext,
                     fl_field_type_name(sf->type), why);
            return sample_bad(w, s, "%s", w->why);
        }
        if (v.kind != PD_VAL_DATA) {
            snprintf(w->why, sizeof w->why, "%s: --field type %s cannot come from a member's bytes",
                     ext, fl_field_type_name(sf->type));
            return sample_bad(w, s, "%s", w->why);
        }
        data = v.data;
        len = v.len;
    }
    return add_part(w, s, f, data, len, npy ? 1 : v.count);
}

/* A .npy member: its elements are the part; dtype and shape must match the first sample's. */
static int add_npy(wds *w, wsample *s, const pd_tar_entry *e, wfield *fd, long f, const uint8_t *d,
                   const char *ext)
{
    fl_dtype dt;
    uint32_t nd;
    uint64_t shape[FL_MAX_DIMS];
    const uint8_t *el;
    size_t el_len;
    char why[300];
    if (pd_npy_parse(d, e->size, &dt, &nd, shape, &el, &el_len, why, sizeof why)) {
        snprintf(w->why, sizeof w->why, "%s: %s", ext, why);
        return sample_bad(w, s, "%s", w->why);
    }
    if (fd->samples == 1) {
        fd->dtype = dt;
        fd->ndim = nd;
        memcpy(fd->shape, shape, sizeof shape);
    } else if (dt != fd->dtype || nd != fd->ndim || memcmp(shape, fd->shape, nd * sizeof *shape)) {
        snprintf(w->why, sizeof w->why,
                 "%s: dtype %s and %u dimensions, but the first sample's "
                 "is %s with %u (every sample's must be the same)",
                 ext, fl_dtype_name(dt), nd, fl_dtype_name(fd->dtype), fd->ndim);
        return sample_bad(w, s, "%s", w->why);
    }
    return add_part(w, s, f, el, el_len, 0);
}

static int visit(void *ctx, const pd_tar_entry *e)
{
    wds *w = ctx;
    const char *p = e->path;
    while (p[0] == '.' && p[1] == '/')
        p += 2;
    if (!*p || e->type == PD_TAR_DIR)
        return 0;
    char what[1200];
    snprintf(what, sizeof what, "%s:%s", w->shard, e->path);
    if (!pd_tar_path_safe(p))
        return bad(w, what,
                   "unsafe member path (absolute, or a '.' or '..' component): refused, never "
                   "used as a path");
    const char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    if (base[0] == '.')
        return 0; /* hidden (._x AppleDouble files, .keep) */
    if (e->type != PD_TAR_FILE)
        return bad(w, what,
                   e->type == PD_TAR_LINK ? "a link member (symbolic or hard): links are "
                                            "not followed"
                                          : "not a regular file");
    const char *dot = strchr(base, '.');
    if (!dot || !dot[1]) {
        w->ignored++; /* no extension: no field to put it in */
        return 0;
    }
    size_t klen = (size_t)(dot - p);
    if (klen >= sizeof w->key)
        return bad(w, what, "member path too long");
    const char *ext = dot + 1;
    if (!w->open || strlen(w->key) != klen || strncmp(w->key, p, klen)) {
        char key[4096];
        memcpy(key, p, klen);
        key[klen] = 0;
        if (new_sample(w, key))
            return 1;
    }
    wsample *s = &w->s[w->ns - 1];
    int rc = 0;
    long f = member_field(w, what, ext, &rc);
    if (f < 0)
        return rc;
    wfield *fd = &w->fields[f];
    kind k = fd->k;
    if (sample_has_field(w, s, f, k)) {
        snprintf(w->why, sizeof w->why,
                 k == K_IMAGE ? "a second image (%s): a sample has one image"
                              : "its %s member twice",
                 ext);
        return sample_bad(w, s, "%s", w->why);
    }
    fd->samples++;
    if (k == K_IMAGE)
        return add_image(w, s, e, what, f);
    uint8_t *d = read_member(w, s, e, ext, &rc);
    if (!d)
        return rc;
    if (k == K_LABEL)
        return add_label(w, s, d);
    if (k == K_SPEC)
        return add_spec(w, s, e, fd, f, d, ext);
    if (k == K_NPY)
        return add_npy(w, s, e, fd, f, d, ext);
    return add_part(w, s, f, d, e->size, 0);
}

/* The --field specs, as fields of their own; a mask spec is refused. Returns 0 or FL_E_INVALID
 * (err set). */
static int wds_add_specs(wds *w, const pd_source_opts *so, fl_error *err)
{
    for (uint32_t i = 0; i < so->n_field_specs; i++) {
        if (pd_field_spec_add(&w->specs, so->field_specs[i], w->why, sizeof w->why))
            return fl_error_set(err, FL_E_INVALID, "%s", w->why);
        if (w->specs.fields[i].type == FL_FIELD_MASK)
            return fl_error_set(err, FL_E_INVALID,
                                "--field %s: mask fields from WebDataset members are "
                                "not supported (pack image/mask pairs with --mask-dir)",
                                so->field_specs[i]);
    }
    return 0;
}

/* Lists every shard's members into samples (visit); with --on-error skip a shard that cannot be
 * read to its end is reported and what it gave is kept. Returns 0 or an error (err set). */
static int wds_list_shards(wds *w, const strlist *shards, const char *spec, pd_reject_ctx *rc,
                           fl_error *err)
{
    int r = 0;
    for (size_t i = 0; i < shards->n && !w->stop; i++) {
        int random;
        w->shard = shards->v[i];
        const char *b = strrchr(w->shard, '/');
        w->shard_base = b ? b + 1 : w->shard;
        w->open = 0;
        r = pd_archive_open(w->out, w->shard, &w->ar, &random, err);
        if (!r)
            r = pd_archive_list(w->ar, 16, visit, w, err);
        if (r == 1 || w->stop)
            break;
        if (r && rc->skip && r != -ENOMEM) {
            /* a shard we cannot open or read to its end: report it, keep what was listed */
            if (pd_reject(rc, w->shard, "%s", err->msg)) {
                w->stop = 1;
                break;
            }
            fl_error_clear(err);
            r = 0;
        }
        if (r)
            break;
    }
    if (w->oom) {
        r = fl_error_set(err, -ENOMEM, "out of memory listing %s", spec);
    } else if (w->stop) {
        if (w->held > MAX_FIELD_BYTES)
            r = fl_error_set(err, FL_E_TOO_LARGE, "--wds %s: %s", spec, w->why);
        else
            r = pd_fail_reported(err, FL_E_FORMAT);
    }
    return r;
}

/* Where the listed fields go in the data set's schema. */
typedef struct wds_schema {
    long img, lab;              /* the image and label (cls) fields, -1: none */
    int classic;                /* image and label alone: no fields in the schema */
    int32_t map[FL_MAX_FIELDS]; /* wds field -> schema field (not classic) */
} wds_schema;

/* The schema: the image, the label (cls), then the other extensions in first-seen order. Refuses
 * shards without images, a --field no member has, two extensions with one field name. Returns 0
 * or FL_E_INVALID (err set). */
static int wds_make_schema(wds *w, const pd_source_opts *so, const char *spec, pd_items *out,
                           wds_schema *sm, fl_error *err)
{
    sm->img = sm->lab = -1;
    for (uint32_t f = 0; f < w->nf; f++) {
        if (w->fields[f].k == K_IMAGE)
            sm->img = f;
        if (w->fields[f].k == K_LABEL)
            sm->lab = f;
    }
    if (sm->img < 0)
        return fl_error_set(err, FL_E_INVALID,
                            "--wds %s: no sample has an image (.jpg .jpeg .png .webp)", spec);
    for (uint32_t i = 0; i < w->specs.num_fields; i++) {
        int used = 0;
        for (uint32_t f = 0; f < w->nf && !used; f++)
            used = w->fields[f].k == K_SPEC && w->fields[f].spec == (int)i;
        if (!used)
            return fl_error_set(err, FL_E_INVALID,
                                "--field %s: no member of the shards has the extension "
                                "'%s'",
                                so->field_specs[i], w->specs.fields[i].name);
    }
    sm->classic = w->nf == (sm->lab >= 0 ? 2u : 1u) && !w->specs.num_fields;
    if (sm->classic)
        return 0;
    out->num_fields = 0;
    char name[FL_MAX_FIELD_NAME + 1];
    field_name(w->fields[sm->img].ext, name, sizeof name);
    sm->map[sm->img] = pd_items_add_field(out, name, FL_FIELD_IMAGE, FL_DTYPE_U8, 0, NULL, -1);
    if (sm->lab >= 0)
        sm->map[sm->lab] = pd_items_add_field(out, "cls", FL_FIELD_INT, FL_DTYPE_I32, 0, NULL, -1);
    for (uint32_t f = 0; f < w->nf; f++) {
        if ((long)f == sm->img || (long)f == sm->lab)
            continue;
        wfield *fd = &w->fields[f];
        field_name(fd->ext, name, sizeof name);
        if (fl_fields_find(out->fields, out->num_fields, name) >= 0)
            return fl_error_set(err, FL_E_INVALID,
                                "--wds %s: extensions '%s' and another give the same "
                                "field name '%s'",
                                spec, fd->ext, name);
        if (fd->k == K_SPEC) {
            const fl_field *sf = &w->specs.fields[fd->spec];
            sm->map[f] =
                pd_items_add_field(out, name, sf->type, sf->dtype, sf->ndim, sf->shape, -1);
            continue;
        }
        uint32_t shape[FL_MAX_DIMS] = {0};
        for (uint32_t d = 0; d < fd->ndim; d++)
            shape[d] = (uint32_t)fd->shape[d];
        sm->map[f] = pd_items_add_field(out, name,
                                        fd->k == K_TEXT  ? FL_FIELD_TEXT
                                        : fd->k == K_NPY ? FL_FIELD_NDARRAY
                                                         : FL_FIELD_BYTES,
                                        fd->k == K_NPY ? fd->dtype : FL_DTYPE_U8,
                                        fd->k == K_NPY ? fd->ndim : 0, shape, -1);
    }
    if (fl_fields_validate(out->fields, out->num_fields, err))
        return FL_E_INVALID;
    return 0;
}

/* The extensions sample s lacks, as "a, b" in missing (empty: it has every field). */
static void sample_missing(const wds *w, const wsample *s, const wds_schema *sm, char *missing,
                           size_t cap)
{
    missing[0] = 0;
    for (uint32_t f = 0; f < w->nf; f++) {
        int has = (long)f == sm->img ? s->image != NULL : (long)f == sm->lab ? s->has_label : 0;
        for (size_t k = 0; k < s->nparts && !has; k++)
            has = w->p[s->part0 + k].field == f;
        if (!has)
            snprintf(missing + strlen(missing), cap - strlen(missing), "%s%s",
                     missing[0] ? ", " : "", w->fields[f].ext);
    }
}

/* The schema values of sample s's parts into it->values; an INT --field that is the label goes to
 * it->label. Returns 0, -ENOMEM, or 1 when that label is out of range (w->why says so). */
static int sample_values(wds *w, const wsample *s, const wds_schema *sm, pd_items *out, pd_item *it)
{
    pd_value *v = pd_items_new_values(out);
    if (!v)
        return -ENOMEM;
    int label_field = fl_fields_label_index(out->fields, out->num_fields);
    for (size_t k = 0; k < s->nparts; k++) {
        const wpart *pt = &w->p[s->part0 + k];
        const fl_field *sf = &out->fields[sm->map[pt->field]];
        if (sm->map[pt->field] == label_field) {
            /* an INT from --field that is the record's label: pd_item's own slot */
            memcpy(&it->label, pt->data, 4);
            char why[200];
            if (pd_check_label(it->label, w->so, why, sizeof why)) {
                snprintf(w->why, sizeof w->why, "field %s (the label): %s", sf->name, why);
                return 1;
            }
            if (it->label > w->max_label)
                w->max_label = it->label;
            continue;
        }
        pd_value *o = &v[sm->map[pt->field]];
        uint32_t count = sf->type == FL_FIELD_TEXT || sf->type == FL_FIELD_BYTES ? (uint32_t)pt->len
                         : w->fields[pt->field].k == K_SPEC                      ? pt->count
                                                                                 : 1;
        o->kind = pt->len || sf->type == FL_FIELD_NDARRAY ? PD_VAL_DATA : PD_VAL_NONE;
        o->data = pt->data;
        o->len = pt->len;
        o->count = count;
    }
    it->values = v;
    return 0;
}

/* Every sample that has every field becomes an item; the others are bad inputs. Returns 0 or an
 * error (err set). */
static int wds_push_samples(wds *w, const wds_schema *sm, const char *spec, pd_reject_ctx *rc,
                            pd_items *out, fl_error *err)
{
    for (size_t i = 0; i < w->ns; i++) {
        wsample *s = &w->s[i];
        if (s->bad)
            continue;
        char missing[256];
        sample_missing(w, s, sm, missing, sizeof missing);
        if (missing[0]) {
            if (pd_reject(rc, s->source,
                          "no %s member (other samples have one): every sample needs "
                          "every field",
                          missing))
                return pd_fail_reported(err, FL_E_FORMAT);
            continue;
        }
        pd_item it;
        memset(&it, 0, sizeof it);
        it.name = s->name;
        it.member = s->image;
        it.label = s->has_label ? s->label : 0;
        int vr = sm->classic ? 0 : sample_values(w, s, sm, out, &it);
        if (vr == 1) {
            if (pd_reject(rc, s->source, "%s", w->why))
                return pd_fail_reported(err, FL_E_LABEL);
            continue;
        }
        if (vr || pd_items_push(out, &it))
            return fl_error_set(err, -ENOMEM, "out of memory listing %s", spec);
    }
    return 0;
}

int pd_src_wds(const char *spec, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
               fl_error *err)
{
    strlist shards = {0};
    int r = shard_list(spec, &shards, err);
    if (r) {
        sl_free(&shards);
        return r;
    }
    wds *w = calloc(1, sizeof *w);
    if (!w) {
        sl_free(&shards);
        return fl_error_set(err, -ENOMEM, "out of memory");
    }
    w->out = out;
    w->so = so;
    w->rc = rc;
    w->max_label = -1;
    pd_items_init(&w->specs);
    wds_schema sm;
    if ((r = wds_add_specs(w, so, err)) || (r = wds_list_shards(w, &shards, spec, rc, err)) ||
        (r = wds_make_schema(w, so, spec, out, &sm, err)) ||
        (r = wds_push_samples(w, &sm, spec, rc, out, err)))
        goto done;
    if (!out->n) {
        r = fl_error_set(err, FL_E_FORMAT, "--wds %s: no usable samples", spec);
        goto done;
    }
    if (w->ignored)
        fprintf(stderr, PD_TOOL ": note: ignored %llu member(s) without an extension in %s\n",
                (unsigned long long)w->ignored, spec);
    /* classes: --classes names, else 0..max label (no label: one class "0") */
    if (pd_items_finish_classes(out, so, w->max_label < 0 ? 0 : w->max_label))
        r = fl_error_set(err, -ENOMEM, "out of memory");
    out->form = "webdataset";
done:
    pd_items_free(&w->specs);
    free(w->s);
    free(w->p);
    free(w);
    sl_free(&shards);
    return r;
}
