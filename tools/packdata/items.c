/* items.c — the deterministic input list (arena-backed strings, owned pixel blocks, shuffle,
 * --part slicing), bad-input reporting, and small file helpers shared by the source parsers. */
#include "packdata.h"

#include "archive_source.h"
#include "fl_file.h"
#include "fl_image.h"
#include "fl_splitmix64.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define ARENA_BLOCK (1u << 20)

void pd_items_init(pd_items *it) { memset(it, 0, sizeof *it); }

void pd_items_free(pd_items *it)
{
    free(it->v);
    free(it->names);
    free(it->labels);
    for (uint32_t i = 0; i < it->num_classes; i++)
        free(it->class_names[i]);
    free(it->class_names);
    for (size_t i = 0; i < it->n_arena; i++)
        free(it->arena[i]);
    free(it->arena);
    for (size_t i = 0; i < it->n_blocks; i++)
        free(it->pixel_blocks[i]);
    free(it->pixel_blocks);
    pd_tar_list_free(it->tar);
    pd_archives_free(it->archives);
    memset(it, 0, sizeof *it);
}

/* n bytes from the arena at a multiple of `align` (blocks come from malloc: 16-aligned). */
static char *arena_alloc(pd_items *it, size_t n, size_t align)
{
    size_t pad = it->n_arena ? (align - it->arena_used % align) % align : 0;
    if (!it->n_arena || it->arena_used + pad + n > it->arena_cap) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        char **a = realloc(it->arena, (it->n_arena + 1) * sizeof *a);
        if (!a)
            return NULL;
        it->arena = a;
        if (!(a[it->n_arena] = malloc(cap)))
            return NULL;
        it->n_arena++;
        it->arena_used = 0;
        it->arena_cap = cap;
        pad = 0;
    }
    char *d = it->arena[it->n_arena - 1] + it->arena_used + pad;
    it->arena_used += pad + n;
    return d;
}

char *pd_items_strndup(pd_items *it, const char *s, size_t n)
{
    char *d = arena_alloc(it, n + 1, 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *pd_items_strdup(pd_items *it, const char *s) { return pd_items_strndup(it, s, strlen(s)); }

void *pd_items_memdup(pd_items *it, const void *data, size_t n)
{
    /* 8-aligned: boxes are float32, ndarray elements up to 8 bytes */
    char *d = arena_alloc(it, n ? n : 1, 8);
    if (!d)
        return NULL;
    if (data)
        memcpy(d, data, n);
    else
        memset(d, 0, n);
    return d;
}

pd_value *pd_items_new_values(pd_items *it)
{
    return pd_items_memdup(it, NULL, (it->num_fields ? it->num_fields : 1) * sizeof(pd_value));
}

int pd_items_add_field(pd_items *it, const char *name, fl_field_type type, fl_dtype dtype,
                       uint32_t ndim, const uint32_t *shape, int32_t of)
{
    if (it->num_fields >= FL_MAX_FIELDS)
        return -1;
    fl_field *f = &it->fields[it->num_fields];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->type = type;
    f->dtype = dtype;
    f->ndim = ndim;
    for (uint32_t d = 0; d < ndim && d < FL_MAX_DIMS; d++)
        f->shape[d] = shape[d];
    f->of = of;
    if (type == FL_FIELD_MASK)
        f->codec = FL_MASK_PNG;
    return (int)it->num_fields++;
}

int pd_items_push(pd_items *it, const pd_item *item)
{
    if (it->names)
        return -EINVAL;
    if (it->n == it->cap) {
        size_t cap = it->cap ? it->cap * 2 : 1024;
        pd_item *v = realloc(it->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        it->v = v;
        it->cap = cap;
    }
    it->v[it->n++] = *item;
    return 0;
}

int pd_items_push_file(pd_items *it, const char *base, const char *name, int32_t label)
{
    if (it->v)
        return -EINVAL;
    if (!it->base && !(it->base = pd_items_strdup(it, base ? base : "")))
        return -ENOMEM;
    if (it->n == it->cap) {
        /* large arrays are mmap'ed by malloc: realloc moves pages, and the capacity not yet
         * written is not resident */
        size_t cap = it->cap ? it->cap * 2 : 1024;
        const char **nv = realloc(it->names, cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        it->names = nv;
        int32_t *lv = realloc(it->labels, cap * sizeof *lv);
        if (!lv)
            return -ENOMEM;
        it->labels = lv;
        it->cap = cap;
    }
    const char *n = pd_items_strdup(it, name);
    if (!n)
        return -ENOMEM;
    it->names[it->n] = n;
    it->labels[it->n] = label;
    it->n++;
    return 0;
}

const pd_item *pd_items_get(const pd_items *it, size_t i, pd_item *tmp, char **path, size_t *cap)
{
    if (!it->names)
        return &it->v[i];
    if (it->tar)
        return pd_tar_item(it, i, tmp, path, cap);
    memset(tmp, 0, sizeof *tmp);
    tmp->name = it->names[i];
    tmp->label = it->labels[i];
    /* under class_prefix the name is the class folder + "/" + the stored rest */
    const char *cls = it->class_prefix && tmp->label >= 0 && (uint32_t)tmp->label < it->num_classes
                          ? it->class_names[tmp->label]
                          : NULL;
    if (!path)
        return cls ? NULL : tmp;
    /* as pd_path_join(base, name) */
    const char *b = it->base, *n = tmp->name;
    size_t bl = !cls && n[0] == '/' ? 0 : strlen(b), nl = strlen(n), cl = cls ? strlen(cls) + 1 : 0;
    int slash = bl && b[bl - 1] != '/';
    size_t need = bl + (size_t)slash + cl + nl + 1;
    if (need > *cap) {
        size_t c = need < 256 ? 256 : need * 2;
        char *p = realloc(*path, c);
        if (!p)
            return NULL;
        *path = p;
        *cap = c;
    }
    char *o = *path;
    memcpy(o, b, bl);
    if (slash)
        o[bl] = '/';
    if (cls) {
        memcpy(o + bl + slash, cls, cl - 1);
        o[bl + slash + cl - 1] = '/';
        tmp->name = o + bl + slash;
    }
    memcpy(o + bl + slash + cl, n, nl + 1);
    tmp->path = o;
    return tmp;
}

const char *pd_items_name(const pd_items *it, size_t i)
{
    return it->names ? it->names[i] : it->v[i].name;
}

int pd_name_format(const char *name)
{
    const char *dot = name ? strrchr(name, '.') : NULL;
    if (!dot || strchr(dot, '/'))
        return FL_IMG_UNKNOWN;
    if (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".jpe"))
        return FL_IMG_JPEG;
    if (!strcasecmp(dot, ".png"))
        return FL_IMG_PNG;
    if (!strcasecmp(dot, ".webp"))
        return FL_IMG_WEBP;
    if (!strcasecmp(dot, ".gif") || !strcasecmp(dot, ".bmp") || !strcasecmp(dot, ".tif") ||
        !strcasecmp(dot, ".tiff"))
        return 4;
    return FL_IMG_UNKNOWN;
}

void pd_items_count_formats(pd_items *it)
{
    memset(it->name_formats, 0, sizeof it->name_formats);
    for (size_t i = 0; i < it->n; i++) {
        const pd_item *v = it->v ? &it->v[i] : NULL;
        int f;
        int tf = it->tar          ? (int)(it->tar->recs[i].size_format & 0xff)
                 : v && v->member ? v->member->format
                                  : -1;
        if (tf >= 0) /* tar members were sniffed when listed */
            f = tf == FL_IMG_UNKNOWN ? 4 : tf;
        else if (v && v->pixels)
            f = FL_IMG_UNKNOWN;
        else /* the stored name ends as the whole name does */
            f = pd_name_format(pd_items_name(it, i));
        it->name_formats[f]++;
    }
    it->name_formats_set = 1;
}

int pd_items_own_block(pd_items *it, uint8_t *block)
{
    uint8_t **b = realloc(it->pixel_blocks, (it->n_blocks + 1) * sizeof *b);
    if (!b) {
        free(block);
        return -ENOMEM;
    }
    it->pixel_blocks = b;
    b[it->n_blocks++] = block;
    return 0;
}

int pd_items_set_classes(pd_items *it, char *const *names, uint32_t n)
{
    for (uint32_t i = 0; i < it->num_classes; i++)
        free(it->class_names[i]);
    free(it->class_names);
    it->num_classes = 0;
    it->class_names = calloc(n ? n : 1, sizeof *it->class_names);
    if (!it->class_names)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        if (!(it->class_names[i] = strdup(names[i])))
            return -ENOMEM;
        it->num_classes = i + 1;
    }
    return 0;
}

int pd_items_numeric_classes(pd_items *it, uint32_t n)
{
    char **names = calloc(n ? n : 1, sizeof *names);
    if (!names)
        return -ENOMEM;
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        char b[16];
        snprintf(b, sizeof b, "%u", i);
        if (!(names[i] = strdup(b)))
            rc = -ENOMEM;
    }
    if (!rc)
        rc = pd_items_set_classes(it, names, n);
    for (uint32_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

void pd_items_shuffle(pd_items *it, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = it->n; i > 1; i--) {
        /* unbiased bounded draw (rejection), so the permutation is a pure function of seed */
        uint64_t bound = i, lim = UINT64_MAX - UINT64_MAX % bound, r;
        do
            r = fl_splitmix64_next(&s);
        while (r >= lim);
        size_t j = (size_t)(r % bound);
        if (it->names) {
            const char *tn = it->names[i - 1];
            it->names[i - 1] = it->names[j];
            it->names[j] = tn;
            int32_t tl = it->labels[i - 1];
            it->labels[i - 1] = it->labels[j];
            it->labels[j] = tl;
            if (it->tar) {
                pd_tar_rec tr = it->tar->recs[i - 1];
                it->tar->recs[i - 1] = it->tar->recs[j];
                it->tar->recs[j] = tr;
            }
            continue;
        }
        pd_item t = it->v[i - 1];
        it->v[i - 1] = it->v[j];
        it->v[j] = t;
    }
}

/* After a slice, plain file inputs (names and paths only: no field values, tar members or
 * in-memory pixels pointing into the arena) move their strings to a fresh arena and the old one
 * is freed, so one task of an N-part job keeps ~1/N of the listing (1.28 M ImageFolder inputs:
 * ~90 bytes of strings and 80 of item each). Out of memory midway: the old blocks are kept too. */
static void compact_strings(pd_items *it)
{
    if (it->in_memory || it->num_fields || it->archives || it->n_blocks)
        return;
    for (size_t i = 0; it->v && i < it->n; i++)
        if (it->v[i].values || it->v[i].member || it->v[i].pixels)
            return;
    char **old = it->arena;
    size_t n_old = it->n_arena;
    it->arena = NULL;
    it->n_arena = it->arena_used = it->arena_cap = 0;
    int oom = 0;
    if (it->names) {
        const char *base = pd_items_strdup(it, it->base);
        if (!base)
            oom = 1;
        else
            it->base = base;
    }
    for (size_t i = 0; it->names && i < it->n && !oom; i++) {
        const char *name = pd_items_strdup(it, it->names[i]);
        if (!name)
            oom = 1;
        else
            it->names[i] = name;
    }
    for (size_t i = 0; it->v && i < it->n && !oom; i++) {
        const char *name = it->v[i].name ? pd_items_strdup(it, it->v[i].name) : NULL;
        const char *path = it->v[i].path ? pd_items_strdup(it, it->v[i].path) : NULL;
        if ((it->v[i].name && !name) || (it->v[i].path && !path))
            oom = 1;
        else
            it->v[i].name = name, it->v[i].path = path;
    }
    if (oom) {
        /* the new blocks stay last: arena_used/arena_cap describe the last one */
        char **a = malloc((it->n_arena + n_old) * sizeof *a);
        if (a) {
            memcpy(a, old, n_old * sizeof *a);
            if (it->n_arena)
                memcpy(a + n_old, it->arena, it->n_arena * sizeof *a);
            free(it->arena);
            free(old);
            it->arena = a;
            it->n_arena += n_old;
            return;
        }
        /* cannot even record both lists: keep the old one as the arena, leak the new blocks'
         * list (their strings stay valid) rather than free a string an item points to */
        it->arena = old;
        it->n_arena = n_old;
        it->arena_used = it->arena_cap = 0;
        return;
    }
    for (size_t i = 0; i < n_old; i++)
        free(old[i]);
    free(old);
}

void pd_items_slice(pd_items *it, uint32_t index, uint32_t count)
{
    if (!count)
        return;
    size_t lo = (size_t)((unsigned __int128)it->n * index / count);
    size_t hi = (size_t)((unsigned __int128)it->n * (index + 1) / count);
    if (it->names) {
        memmove(it->names, it->names + lo, (hi - lo) * sizeof *it->names);
        memmove(it->labels, it->labels + lo, (hi - lo) * sizeof *it->labels);
        if (it->tar)
            memmove(it->tar->recs, it->tar->recs + lo, (hi - lo) * sizeof *it->tar->recs);
        it->n = hi - lo;
        if (it->n && it->n < it->cap) {
            const char **nv = realloc(it->names, it->n * sizeof *nv);
            if (nv)
                it->names = nv;
            int32_t *lv = realloc(it->labels, it->n * sizeof *lv);
            if (lv)
                it->labels = lv;
            if (nv && lv)
                it->cap = it->n;
        }
        compact_strings(it);
        return;
    }
    memmove(it->v, it->v + lo, (hi - lo) * sizeof *it->v);
    it->n = hi - lo;
    if (it->n && it->n < it->cap) {
        pd_item *v = realloc(it->v, it->n * sizeof *v);
        if (v)
            it->v = v, it->cap = it->n;
    }
    compact_strings(it);
}

int pd_reject(pd_reject_ctx *rc, const char *source, const char *fmt, ...)
{
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (rc->report) {
        /* TSV: keep tabs and newlines out of the fields */
        for (const char *p = source; *p; p++)
            fputc(*p == '\t' || *p == '\n' ? ' ' : *p, rc->report);
        fputc('\t', rc->report);
        for (const char *p = why; *p; p++)
            fputc(*p == '\t' || *p == '\n' ? ' ' : *p, rc->report);
        fputc('\n', rc->report);
        fflush(rc->report);
    }
    if (!rc->skip) {
        if (!rc->silent)
            fprintf(stderr, PD_TOOL ": error: %s: %s\n", source, why);
        return -1;
    }
    rc->skipped++;
    if (rc->silent)
        return 0;
    if (!rc->quiet_limit || rc->printed < (uint64_t)rc->quiet_limit)
        fprintf(stderr, PD_TOOL ": skipping %s: %s\n", source, why);
    else if (rc->printed == (uint64_t)rc->quiet_limit)
        fprintf(stderr, PD_TOOL ": (further skips are not printed%s)\n",
                rc->report ? "; see the report" : "");
    rc->printed++;
    return 0;
}

int pd_fail_reported(fl_error *err, int code)
{
    if (err) {
        err->code = code;
        err->msg[0] = 0;
    }
    return code;
}

char *pd_path_join(const char *dir, const char *name)
{
    if (!dir || !*dir || name[0] == '/')
        return strdup(name);
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

static int read_plain(const char *path, size_t max_len, uint8_t **data, size_t *len, fl_error *err)
{
    uint8_t *b = NULL;
    fl_read_step step;
    int rc = fl_read_file_at(AT_FDCWD, path, max_len, FL_READ_REGULAR | FL_READ_SHORT_OK, &b, NULL,
                             len, &step);
    if (rc)
        free(b);
    switch (step) {
    case FL_READ_DONE: break;
    case FL_READ_OPEN: return fl_error_set(err, rc, "%s: cannot open: %s", path, strerror(-rc));
    case FL_READ_NOT_REGULAR: return fl_error_set(err, -EISDIR, "%s: not a regular file", path);
    case FL_READ_TOO_LARGE:
        return fl_error_set(err, FL_E_TOO_LARGE, "%s: file is %lld bytes, over the %zu-byte limit",
                            path, (long long)*len, max_len);
    case FL_READ_ALLOC: return fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    case FL_READ_READ: return fl_error_set(err, rc, "%s: read: %s", path, strerror(-rc));
    case FL_READ_STAT:
    case FL_READ_SHRANK: return fl_error_set(err, rc, "%s: %s", path, strerror(-rc));
    }
    *data = b;
    return 0;
}

int pd_read_file(const char *path, int gunzip, size_t max_len, uint8_t **data, size_t *len,
                 fl_error *err)
{
    uint8_t *raw = NULL;
    size_t n = 0;
    int rc = read_plain(path, max_len, &raw, &n, err);
    if (rc)
        return rc;
    if (!gunzip || n < 2 || raw[0] != 0x1f || raw[1] != 0x8b) {
        *data = raw;
        *len = n;
        return 0;
    }
    /* gzip: inflate (possibly concatenated members) into a growing buffer, bounded by max_len */
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
        free(raw);
        return fl_error_set(err, -ENOMEM, "%s: zlib init failed", path);
    }
    size_t cap = n * 4 + 1024, used = 0;
    if (cap > max_len + 1)
        cap = max_len + 1;
    uint8_t *out = malloc(cap);
    if (!out) {
        inflateEnd(&zs);
        free(raw);
        return fl_error_set(err, -ENOMEM, "%s: out of memory", path);
    }
    zs.next_in = raw;
    zs.avail_in = (uInt)n; /* files > 4 GiB are refused above by max_len in practice */
    int zr = Z_OK;
    for (;;) {
        if (used == cap) {
            if (cap > max_len) {
                zr = Z_MEM_ERROR;
                break;
            }
            size_t nc = cap * 2;
            if (nc > max_len + 1)
                nc = max_len + 1;
            uint8_t *o = realloc(out, nc);
            if (!o) {
                zr = Z_MEM_ERROR;
                break;
            }
            out = o;
            cap = nc;
        }
        zs.next_out = out + used;
        zs.avail_out = (uInt)(cap - used > 1u << 30 ? 1u << 30 : cap - used);
        uInt before = zs.avail_out;
        zr = inflate(&zs, Z_NO_FLUSH);
        used += before - zs.avail_out;
        if (zr == Z_STREAM_END) {
            if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b) {
                inflateReset(&zs);
                continue;
            }
            break;
        }
        if (zr != Z_OK && !(zr == Z_BUF_ERROR && zs.avail_out == 0))
            break;
    }
    inflateEnd(&zs);
    free(raw);
    if (zr != Z_STREAM_END) {
        free(out);
        if (zr == Z_MEM_ERROR && used >= cap)
            return fl_error_set(err, FL_E_TOO_LARGE,
                                "%s: decompressed size over the %zu-byte limit", path, max_len);
        return fl_error_set(err, FL_E_DECODE, "%s: corrupt or truncated gzip data", path);
    }
    *data = out;
    *len = used;
    return 0;
}

int pd_check_label(long long v, const pd_source_opts *so, char *why, size_t cap)
{
    long long limit = so->num_classes > 0 ? so->num_classes
                      : so->n_class_names ? (long long)so->n_class_names
                                          : (long long)PD_MAX_CLASSES;
    if (v >= 0 && v < limit)
        return 0;
    if (!(so->num_classes > 0) && !so->n_class_names)
        snprintf(why, cap, "label %lld is out of range (0..%d without --num-classes)", v,
                 PD_MAX_CLASSES - 1);
    else
        snprintf(why, cap, "label %lld is out of range (%lld classes: 0..%lld)", v, limit,
                 limit - 1);
    return -1;
}

int pd_parse_label(const char *s, const pd_source_opts *so, int32_t *label, char *why, size_t cap)
{
    const char *p = s;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
        n--;
    if (!n) {
        snprintf(why, cap, "missing label");
        return -1;
    }
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    int numeric = end == p + n && !errno && (p[0] == '-' || (p[0] >= '0' && p[0] <= '9'));
    if (!numeric) {
        for (uint32_t i = 0; i < so->n_class_names; i++) {
            if (strlen(so->class_names[i]) == n && !memcmp(so->class_names[i], p, n)) {
                *label = (int32_t)i;
                return 0;
            }
        }
        snprintf(why, cap, "label '%.*s' is not a number%s", (int)(n > 64 ? 64 : n), p,
                 so->n_class_names ? " nor a class name" : "");
        return -1;
    }
    if (pd_check_label(v, so, why, cap))
        return -1;
    *label = (int32_t)v;
    return 0;
}

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int pd_strset_add(pd_strset *s, const char *str)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1024;
        const char **ns = calloc(nc, sizeof *ns);
        if (!ns)
            return -ENOMEM;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slots[i])
                continue;
            size_t k = str_hash(s->slots[i]) & (nc - 1);
            while (ns[k])
                k = (k + 1) & (nc - 1);
            ns[k] = s->slots[i];
        }
        free(s->slots);
        s->slots = ns;
        s->cap = nc;
    }
    size_t k = str_hash(str) & (s->cap - 1);
    while (s->slots[k]) {
        if (!strcmp(s->slots[k], str))
            return 0;
        k = (k + 1) & (s->cap - 1);
    }
    s->slots[k] = str;
    s->n++;
    return 1;
}

void pd_strset_free(pd_strset *s)
{
    free(s->slots);
    memset(s, 0, sizeof *s);
}

int pd_items_finish_classes(pd_items *it, const pd_source_opts *so, int32_t max_label)
{
    if (so->n_class_names)
        return pd_items_set_classes(it, so->class_names, so->n_class_names);
    uint32_t n = so->num_classes > 0 ? (uint32_t)so->num_classes : (uint32_t)(max_label + 1);
    return pd_items_numeric_classes(it, n);
}

/* Does the relative `rel` climb above its start with ".."? */
static int climbs(const char *rel)
{
    long depth = 0;
    for (const char *p = rel; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return 1;
        } else if (n && !(n == 1 && p[0] == '.')) {
            depth++;
        }
        p += n + (e ? 1 : 0);
    }
    return 0;
}

int pd_path_leaves(const char *root, const char *path)
{
    if (path[0] != '/')
        return climbs(path);
    /* an absolute path is inside when it starts with root's real path (cached: one root a run) */
    static char *last_root, *last_real;
    if (!last_root || strcmp(last_root, root) != 0) {
        free(last_root);
        free(last_real);
        last_root = strdup(root);
        last_real = realpath(root, NULL);
    }
    if (!last_real)
        return 1;
    size_t n = strlen(last_real);
    if (strncmp(path, last_real, n) != 0)
        return 1;
    if (n == 1)
        return climbs(path + 1); /* root is "/" */
    if (path[n] != '/')
        return 1;
    return climbs(path + n + 1);
}

int pd_link_leaves(const char *real_root, const char *path)
{
    char *real = realpath(path, NULL);
    if (!real)
        return 0;
    size_t n = strlen(real_root);
    int out = !(strncmp(real, real_root, n) == 0 && (real[n] == '/' || real[n] == 0 || n == 1));
    free(real);
    return out;
}

/* The key that finds a listed path twice: the path without "." components and repeated
 * slashes ("./a.jpg", "a//b.jpg" and "a/./b.jpg" name the files of "a.jpg", "a/b.jpg"); the
 * path itself when it has none (no copy), else a copy in out's arena; NULL when out of memory.
 * ".." is left alone: through a link it need not name what the lexical form says. */
static const char *dedup_key(pd_items *out, const char *path)
{
    int plain = 1;
    for (const char *c = path; *c && plain; c++)
        if ((*c == '/' && c[1] == '/') ||
            (*c == '.' && (c == path || c[-1] == '/') && (c[1] == '/' || c[1] == '\0')))
            plain = 0;
    if (plain)
        return path;
    size_t n = strlen(path);
    char *k = malloc(n + 1), *w = k;
    if (!k)
        return NULL;
    const char *c = path;
    if (*c == '/')
        *w++ = *c++;
    while (*c) {
        const char *e = strchr(c, '/');
        size_t l = e ? (size_t)(e - c) : strlen(c);
        if (l && !(l == 1 && c[0] == '.')) {
            if (w > k && w[-1] != '/')
                *w++ = '/';
            memcpy(w, c, l);
            w += l;
        }
        c += l;
        while (*c == '/')
            c++;
    }
    *w = '\0';
    const char *r = pd_items_strdup(out, k);
    free(k);
    return r;
}

int pd_add_listed(pd_items *out, pd_strset *seen, pd_reject_ctx *rc, const pd_source_opts *so,
                  const char *src, const char *root, const char *path, const char *label_text,
                  int32_t *max_label)
{
    int32_t label;
    char why[256];
    if (!so->allow_outside_root && pd_path_leaves(root, path))
        return pd_reject(rc, src,
                         "%.400s is outside %s (an absolute path, or one climbing with "
                         "..): refused, a list could otherwise pack any file of this machine "
                         "(--allow-outside-root packs it)",
                         path, root)
                   ? 1
                   : 0;
    if (pd_parse_label(label_text, so, &label, why, sizeof why))
        return pd_reject(rc, src, "%s (path %.200s)", why, path) ? 1 : 0;
    if (!out->num_fields && !out->v) {
        /* a plain file input: its name, the file is root + name (pd_items_get) */
        int pr = pd_items_push_file(out, root, path, label);
        if (pr)
            return pr;
        const char *key = dedup_key(out, out->names[out->n - 1]);
        int ins = key ? pd_strset_add(seen, key) : -ENOMEM;
        if (ins < 0)
            return -ENOMEM;
        if (!ins) {
            out->n--; /* its name stays in the arena, unused */
            return pd_reject(rc, src, "duplicate entry: %.400s is listed twice", path) ? 1 : 0;
        }
        if (label > *max_label)
            *max_label = label;
        return 0;
    }
    pd_item it = {0};
    it.name = pd_items_strdup(out, path);
    char *full = pd_path_join(root, path);
    if (!it.name || !full) {
        free(full);
        return -ENOMEM;
    }
    it.path = pd_items_strdup(out, full);
    free(full);
    if (!it.path)
        return -ENOMEM;
    const char *key = dedup_key(out, it.name);
    int ins = key ? pd_strset_add(seen, key) : -ENOMEM;
    if (ins < 0)
        return -ENOMEM;
    if (!ins)
        return pd_reject(rc, src, "duplicate entry: %.400s is listed twice", path) ? 1 : 0;
    it.label = label;
    if (label > *max_label)
        *max_label = label;
    return pd_items_push(out, &it) ? -ENOMEM : 0;
}

int pd_listing_open(pd_listing *l, const char *file, const pd_source_opts *so, fl_error *err)
{
    memset(l, 0, sizeof *l);
    l->file = file;
    l->max_label = -1;
    int r = pd_read_file(file, 0, 1ull << 32, &l->data, &l->len, err);
    if (r)
        return r;
    if (l->len >= 3 && !memcmp(l->data, "\xEF\xBB\xBF", 3))
        l->start = 3; /* UTF-8 BOM */
    l->root = so->root ? strdup(so->root) : fl_dir_of(file);
    if (!l->root)
        return pd_listing_end(l, PD_LISTING_OOM, NULL, so, NULL, err);
    return 0;
}

int pd_listing_add(pd_listing *l, pd_items *out, pd_reject_ctx *rc, const pd_source_opts *so,
                   const char *src, const char *path, const char *label_text)
{
    return pd_add_listed(out, &l->seen, rc, so, src, l->root, path, label_text, &l->max_label);
}

int pd_listing_add_row(pd_listing *l, pd_items *out, pd_reject_ctx *rc, const pd_source_opts *so,
                       const char *src, size_t line, const char *label_text)
{
    pd_item it = {0};
    char why[256];
    if (label_text && pd_parse_label(label_text, so, &it.label, why, sizeof why))
        return pd_reject(rc, src, "%s", why) ? 1 : 0;
    const char *slash = strrchr(l->file, '/');
    char name[300];
    snprintf(name, sizeof name, "%.200s:%zu", slash ? slash + 1 : l->file, line);
    if (!(it.name = pd_items_strdup(out, name)))
        return -ENOMEM;
    if (label_text && it.label > l->max_label)
        l->max_label = it.label; /* no label: no classes (unless --classes names them) */
    return pd_items_push(out, &it) ? -ENOMEM : 0;
}

int pd_listing_end(pd_listing *l, int how, pd_items *out, const pd_source_opts *so,
                   const char *form, fl_error *err)
{
    int r = how;
    if (how == PD_LISTING_DONE) {
        out->form = form;
        r = 0;
        if (pd_items_finish_classes(out, so, l->max_label))
            how = PD_LISTING_OOM;
    }
    if (how == PD_LISTING_OOM)
        r = fl_error_set(err, -ENOMEM, "out of memory reading %s", l->file);
    else if (how == PD_LISTING_STOPPED)
        r = pd_fail_reported(err, FL_E_LABEL);
    free(l->root);
    free(l->data);
    pd_strset_free(&l->seen);
    memset(l, 0, sizeof *l);
    return r;
}
