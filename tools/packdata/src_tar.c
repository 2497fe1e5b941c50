/* src_tar.c — an ImageFolder inside a tar file, read in place: either ImageNet's training tar (a
 * tar of per-class tars: n01440764.tar ... each holding that class's JPEGs; the class is the
 * inner tar's name) or a tar of class folders (class/.../image; one common top folder, as
 * `tar cf train.tar train/` writes, is looked through). The records are those packing the
 * extracted folder would give: the same names (class/path), classes and order (class folders
 * sorted by name, files by path component by component, hidden entries ignored).
 * Member paths are untrusted: an absolute path or a "." / ".." component is refused (it is never
 * used as a path; the record name would be one); link members with an image extension are
 * refused too (their bytes are elsewhere); other links, folders and devices are ignored.
 * Memory: the list holds each member compactly (its name relative to its class in the item
 * arena, a 24-byte pd_tar_rec, a label: ~60 bytes a member, no per-member object); the pd_member
 * a worker reads is built on demand (pd_tar_item). The per-class tars of ImageNet's layout are
 * listed one class at a time in class order, so the whole tar is never sorted in memory; under
 * --part (pd_source_opts.part_count) a first pass counts each class's members and a second lists
 * again only the inner tars holding this part's slice, as the folder source does. */
#include "archive_source.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fl_image.h"

/* A member while a class (ImageNet layout) or the whole tar (class folders) is listed. */
typedef struct lrec {
    size_t name;  /* offset of its path (as stored, "./" stripped) in the listing's blob */
    uint64_t seq; /* listing order: of two members of one name the later is kept */
    pd_tar_rec rec;
    int drop; /* a duplicate of a later member */
} lrec;

typedef struct tar_list {
    pd_items *out;
    pd_tar_list *tl;
    pd_reject_ctx *rc;
    pd_archive *ar;
    const char *tar;   /* the outer tar's path */
    const char *inner; /* inner tar name (ImageNet layout) or NULL */
    uint32_t inner_ix; /* its index in tl->inner */
    lrec *v;
    size_t n, cap;
    char *blob; /* member paths, NUL-terminated */
    size_t blob_len, blob_cap;
    uint64_t seq;
    /* outer entries that are tars at the top (ImageNet layout) */
    pd_tar_entry *tars;
    char **tar_names;
    size_t n_tars, cap_tars;
    uint64_t ignored, no_class;
    int failed; /* pd_reject said stop */
    int oom;
} tar_list;

static int has_image_ext(const char *n)
{
    const char *slash = strrchr(n, '/');
    const char *dot = strrchr(slash ? slash : n, '.');
    if (!dot)
        return 0;
    static const char *const ext[] = {".jpg", ".jpeg", ".jpe", ".png", ".webp",
                                      ".gif", ".bmp",  ".tif", ".tiff"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (!strcasecmp(dot, ext[i]))
            return 1;
    return 0;
}

/* Leading "./" (and "/" after it) dropped: `tar cf x.tar -C dir .` writes "./class/x.jpg". */
static const char *strip_dot(const char *p)
{
    while (p[0] == '.' && p[1] == '/') {
        p += 2;
        while (*p == '/')
            p++;
    }
    return p;
}

static int hidden(const char *p)
{
    for (const char *c = p; *c; c++)
        if (*c == '.' && (c == p || c[-1] == '/'))
            return 1;
    return 0;
}

static uint8_t sniff(const uint8_t *b, size_t n)
{
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF)
        return FL_IMG_JPEG;
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8))
        return FL_IMG_PNG;
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4))
        return FL_IMG_WEBP;
    return FL_IMG_UNKNOWN;
}

/* Report a bad member, "tar:inner:path" naming it (with `top` between, a class-folder tar's). */
static int reject_at(tar_list *l, const char *inner, const char *top, const char *path,
                     const char *why)
{
    size_t n = strlen(l->tar) + strlen(path) + strlen(top) + (inner ? strlen(inner) + 1 : 0) + 2;
    char *src = malloc(n);
    if (!src) {
        l->oom = 1;
        return 1;
    }
    if (inner)
        snprintf(src, n, "%s:%s:%s%s", l->tar, inner, top, path);
    else
        snprintf(src, n, "%s:%s%s", l->tar, top, path);
    int stop = pd_reject(l->rc, src, "%s", why) != 0;
    free(src);
    if (stop)
        l->failed = 1;
    return stop;
}

static int reject(tar_list *l, const char *path, const char *why)
{
    return reject_at(l, l->inner, "", path, why);
}

static int grow(void **v, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : first;
    while (nc < need)
        nc *= 2;
    void *nv = realloc(*v, nc * size);
    if (!nv)
        return -1;
    *v = nv;
    *cap = nc;
    return 0;
}

static int visit(void *ctx, const pd_tar_entry *e)
{
    tar_list *l = ctx;
    const char *p = strip_dot(e->path);
    if (!*p)
        return 0; /* "./" itself */
    if (!pd_tar_path_safe(p))
        return reject(l, e->path,
                      "unsafe member path (absolute, or a '.' or '..' component): "
                      "refused, never used as a path");
    if (e->type == PD_TAR_DIR || hidden(p))
        return 0;
    size_t plen = strlen(p);
    int is_tar = !l->inner && !strchr(p, '/') && plen > 4 && !strcasecmp(p + plen - 4, ".tar");
    if (e->type != PD_TAR_FILE) {
        if (has_image_ext(p) || is_tar)
            return reject(l, e->path,
                          e->type == PD_TAR_LINK ? "a link member (symbolic or hard): "
                                                   "links are not followed"
                                                 : "not a regular file");
        l->ignored++;
        return 0;
    }
    if (is_tar) {
        if (l->n_tars == l->cap_tars) {
            size_t nc = l->cap_tars ? l->cap_tars * 2 : 64;
            pd_tar_entry *t = realloc(l->tars, nc * sizeof *t);
            char **tn = t ? realloc(l->tar_names, nc * sizeof *tn) : NULL;
            if (t)
                l->tars = t;
            if (!t || !tn)
                return l->oom = 1;
            l->tar_names = tn;
            l->cap_tars = nc;
        }
        l->tars[l->n_tars] = *e;
        if (!(l->tar_names[l->n_tars] = strdup(p)))
            return l->oom = 1;
        l->tars[l->n_tars].path = NULL; /* the listing's buffer: not kept */
        l->n_tars++;
        return 0;
    }
    if (!has_image_ext(p)) {
        l->ignored++;
        return 0;
    }
    if (e->sparse)
        return reject(l, e->path, "a sparse member: its bytes are not stored in one piece");
    if (!l->inner && !strchr(p, '/')) {
        l->no_class++; /* an image outside any class folder, as in an ImageFolder's top */
        return 0;
    }
    if (e->entry > UINT32_MAX || e->size >> 56)
        return reject(l, e->path,
                      "over 2^32 members before it, or a member over 2^56 bytes: refused");
    if (grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v, 1024) ||
        grow((void **)&l->blob, &l->blob_cap, l->blob_len + plen + 1, 1, 1 << 16))
        return l->oom = 1;
    lrec *r = &l->v[l->n++];
    memset(r, 0, sizeof *r);
    r->name = l->blob_len;
    memcpy(l->blob + l->blob_len, p, plen + 1);
    l->blob_len += plen + 1;
    r->seq = l->seq++;
    r->rec.offset = e->offset;
    r->rec.size_format = e->size << 8 | sniff(e->head, e->head_len);
    r->rec.entry = (uint32_t)e->entry;
    r->rec.inner = l->inner ? l->inner_ix : UINT32_MAX;
    return 0;
}

/* Compare record names path component by component (what a sorted folder walk yields). */
static int cmp_path(const char *a, const char *b)
{
    for (;;) {
        size_t na = strcspn(a, "/"), nb = strcspn(b, "/");
        size_t n = na < nb ? na : nb;
        int c = memcmp(a, b, n);
        if (c)
            return c;
        if (na != nb)
            return na < nb ? -1 : 1;
        if (!a[na] || !b[nb])
            return a[na] ? 1 : b[nb] ? -1 : 0;
        a += na + 1;
        b += nb + 1;
    }
}

static int cmp_lrec(const void *x, const void *y, void *blob)
{
    const lrec *a = x, *b = y;
    int c = cmp_path((const char *)blob + a->name, (const char *)blob + b->name);
    return c ? c : a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Sort what was listed into record order and mark duplicates (extracting would keep only the
 * last one listed): reported through l->rc. Returns how many are kept. */
static size_t sort_dedup(tar_list *l, const char *top)
{
    if (l->n > 1)
        qsort_r(l->v, l->n, sizeof *l->v, cmp_lrec, l->blob);
    size_t kept = l->n;
    for (size_t i = 1; i < l->n && !l->failed && !l->oom; i++) {
        if (strcmp(l->blob + l->v[i].name, l->blob + l->v[i - 1].name))
            continue;
        kept--;
        l->v[i - 1].drop = 1; /* skip mode: keep the later one, as extracting would */
        uint32_t in = l->v[i].rec.inner;
        reject_at(l, in != UINT32_MAX ? l->tar_names[in] : NULL, top, l->blob + l->v[i].name,
                  "listed twice in the tar (extracting it would keep only one): refused");
    }
    return kept;
}

static long find_name(char *const *names, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == len && !memcmp(names[i], s, len))
            return (long)i;
    return -1;
}

/* A failed listing: fail mode stops; skip mode reports the archive and keeps what was listed. */
static int listing_error(tar_list *l, int r, fl_error *err)
{
    if (l->oom)
        return fl_error_set(err, -ENOMEM, "out of memory listing %s", l->tar);
    if (r == 1 || l->failed)
        return pd_fail_reported(err, FL_E_FORMAT);
    if (r == FL_E_FORMAT && l->rc->skip) {
        if (pd_reject(l->rc, l->tar, "%s", err->msg))
            return pd_fail_reported(err, FL_E_FORMAT);
        fl_error_clear(err);
        return 0;
    }
    return r;
}

/* Append member r (name: the path after its class folder) to the list. */
static int push(tar_list *l, const char *name, int32_t label, const pd_tar_rec *r)
{
    pd_items *out = l->out;
    if (pd_items_push_file(out, "", name, label))
        return -ENOMEM;
    if (out->cap > l->tl->cap) {
        pd_tar_rec *nr = realloc(l->tl->recs, out->cap * sizeof *nr);
        if (!nr) {
            out->n--;
            return -ENOMEM;
        }
        l->tl->recs = nr;
        l->tl->cap = out->cap;
    }
    l->tl->recs[out->n - 1] = *r;
    return 0;
}

/* The label of class `cls` (len bytes): its place in --classes, or the next one (classes kept
 * in the order met, which is name order). -1 with err set when --classes lacks it. */
static int32_t class_label(const pd_source_opts *so, char ***kept, uint32_t *n_kept,
                           uint32_t *cap_kept, const char *path, const char *cls, size_t len,
                           fl_error *err)
{
    if (so->n_class_names) {
        long c = find_name(so->class_names, so->n_class_names, cls, len);
        if (c < 0)
            fl_error_set(err, FL_E_INVALID,
                         "%s: class '%.*s' is not a class of --classes "
                         "(%u names): add it to the list",
                         path, (int)len, cls, so->n_class_names);
        return (int32_t)c;
    }
    if (*n_kept && strlen((*kept)[*n_kept - 1]) == len && !memcmp((*kept)[*n_kept - 1], cls, len))
        return (int32_t)(*n_kept - 1);
    if (*n_kept == *cap_kept) {
        uint32_t nc = *cap_kept ? *cap_kept * 2 : 64;
        char **k = realloc(*kept, nc * sizeof *k);
        if (!k)
            goto oom;
        *kept = k;
        *cap_kept = nc;
    }
    if (!((*kept)[*n_kept] = strndup(cls, len)))
        goto oom;
    return (int32_t)(*n_kept)++;
oom:
    fl_error_set(err, -ENOMEM, "out of memory listing %s", path);
    return -1;
}

/* The inner tars (ImageNet layout) of class group [g0, g1) of ord (same class name) listed
 * into l->v, sorted, duplicates marked (reported through l->rc). Returns 0 or an error. */
static int list_group(tar_list *l, const size_t *ord, size_t g0, size_t g1, size_t *kept,
                      fl_error *err)
{
    l->n = l->blob_len = 0;
    int r = 0;
    for (size_t g = g0; g < g1 && !r; g++) {
        size_t t = ord[g];
        l->inner = l->tar_names[t];
        l->inner_ix = (uint32_t)t;
        r = pd_archive_list_inner(l->ar, l->tars[t].offset, l->tars[t].size, l->inner, 16, visit, l,
                                  err);
        if (r)
            r = listing_error(l, r, err);
    }
    if (!r)
        *kept = sort_dedup(l, "");
    if (!r && (l->oom || l->failed))
        r = listing_error(l, 1, err);
    l->inner = NULL;
    return r;
}

static int cmp_class(const void *x, const void *y, void *names)
{
    char *const *n = names;
    const char *a = n[*(const size_t *)x], *b = n[*(const size_t *)y];
    size_t la = strlen(a) - 4, lb = strlen(b) - 4;
    int c = memcmp(a, b, la < lb ? la : lb);
    if (c)
        return c;
    if (la != lb)
        return la < lb ? -1 : 1;
    return *(const size_t *)x < *(const size_t *)y ? -1 : 1;
}

/* Slice [lo, hi) of a job of n inputs under --part. */
static void part_range(const pd_source_opts *so, uint64_t n, uint64_t *lo, uint64_t *hi)
{
    *lo = (uint64_t)((unsigned __int128)n * so->part_index / so->part_count);
    *hi = (uint64_t)((unsigned __int128)n * (so->part_index + 1) / so->part_count);
}

static void count_format(pd_items *out, const pd_tar_rec *r)
{
    int f = (int)(r->size_format & 0xff);
    out->name_formats[f == FL_IMG_UNKNOWN ? 4 : f]++;
}

/* ImageNet's layout: each top-level tar is a class, listed one class at a time in class order.
 * Under --part a first pass counts (and reports), a second lists only the slice's classes. */
static int list_nested(tar_list *l, const pd_source_opts *so, char ***kept, uint32_t *n_kept,
                       uint32_t *cap_kept, fl_error *err)
{
    pd_items *out = l->out;
    pd_tar_list *tl = l->tl;
    const uint32_t parts = so->part_count;
    size_t nt = l->n_tars;
    size_t *ord = malloc(nt * sizeof *ord);
    uint64_t *count = parts ? calloc(nt, sizeof *count) : NULL;
    int32_t *label = parts ? calloc(nt, sizeof *label) : NULL;
    tl->inner = pd_items_memdup(out, NULL, nt * sizeof *tl->inner);
    int r = 0;
    if (!ord || (parts && (!count || !label)) || !tl->inner || nt > UINT32_MAX) {
        r = fl_error_set(err, -ENOMEM, "out of memory listing %s", l->tar);
        goto done;
    }
    for (size_t t = 0; t < nt; t++) {
        ord[t] = t;
        if (!(tl->inner[t] = pd_items_strdup(out, l->tar_names[t]))) {
            r = fl_error_set(err, -ENOMEM, "out of memory listing %s", l->tar);
            goto done;
        }
    }
    tl->n_inner = (uint32_t)nt;
    if (nt > 1)
        qsort_r(ord, nt, sizeof *ord, cmp_class, l->tar_names);
    uint64_t n = 0;
    for (size_t g0 = 0, g1; g0 < nt && !r; g0 = g1) {
        const char *cls = l->tar_names[ord[g0]];
        size_t cl = strlen(cls) - 4;
        for (g1 = g0 + 1; g1 < nt && strlen(l->tar_names[ord[g1]]) - 4 == cl &&
                          !memcmp(l->tar_names[ord[g1]], cls, cl);
             g1++)
            ;
        size_t k = 0;
        if ((r = list_group(l, ord, g0, g1, &k, err)))
            break;
        if (!k)
            continue;
        int32_t lab = class_label(so, kept, n_kept, cap_kept, l->tar, cls, cl, err);
        if (lab < 0) {
            r = err->code;
            break;
        }
        for (size_t i = 0; i < l->n; i++)
            if (!l->v[i].drop)
                count_format(out, &l->v[i].rec);
        if (parts) {
            count[g0] = k;
            label[g0] = lab;
        }
        for (size_t i = 0; i < l->n && !parts && !r; i++)
            if (!l->v[i].drop && push(l, l->blob + l->v[i].name, lab, &l->v[i].rec))
                r = fl_error_set(err, -ENOMEM, "out of memory listing %s", l->tar);
        n += k;
    }
    if (r || !parts)
        goto done;
    /* the second pass: the classes holding [lo, hi), reported already (silent now) */
    out->presliced = 1;
    out->job_n = n;
    if (!n || so->part_count > n)
        goto done; /* the caller says why there is nothing to pack */
    uint64_t lo, hi, first = 0;
    part_range(so, n, &lo, &hi);
    pd_reject_ctx quiet = {.skip = 1, .silent = 1}, *loud = l->rc;
    l->rc = &quiet;
    const uint64_t ignored = l->ignored;
    for (size_t g0 = 0, g1; g0 < nt && first < hi && !r; g0 = g1) {
        size_t cl = strlen(l->tar_names[ord[g0]]) - 4;
        for (g1 = g0 + 1; g1 < nt && strlen(l->tar_names[ord[g1]]) - 4 == cl &&
                          !memcmp(l->tar_names[ord[g1]], l->tar_names[ord[g0]], cl);
             g1++)
            ;
        uint64_t end = first + count[g0];
        if (end <= lo || !count[g0]) {
            first = end;
            continue;
        }
        size_t k = 0;
        if ((r = list_group(l, ord, g0, g1, &k, err)))
            break;
        if (k != count[g0]) {
            r = fl_error_set(err, FL_E_FORMAT,
                             "%s: %s: %llu images when first listed, %zu now: the tar changed "
                             "while it was listed (the parts of a --part job must list the same "
                             "inputs): pack again once SRC no longer changes",
                             l->tar, l->tar_names[ord[g0]], (unsigned long long)count[g0], k);
            break;
        }
        uint64_t j = 0; /* index among the kept */
        for (size_t i = 0; i < l->n && first + j < hi && !r; i++) {
            if (l->v[i].drop)
                continue;
            if (first + j >= lo && push(l, l->blob + l->v[i].name, label[g0], &l->v[i].rec))
                r = fl_error_set(err, -ENOMEM, "out of memory listing %s", l->tar);
            j++;
        }
        first = end;
    }
    l->rc = loud;
    l->ignored = ignored;
done:
    free(ord);
    free(count);
    free(label);
    return r;
}

/* A tar of class folders: everything listed at once, sorted, then kept (under --part only the
 * slice: the list is sliced as it is made, the listing's own records are freed after). */
static int list_flat(tar_list *l, const pd_source_opts *so, char ***kept, uint32_t *n_kept,
                     uint32_t *cap_kept, fl_error *err)
{
    pd_items *out = l->out;
    /* one common top folder holding every class folder: look through it */
    const char *n0 = l->blob + l->v[0].name;
    size_t k = strcspn(n0, "/");
    int common = 1;
    for (size_t i = 0; i < l->n && common; i++) {
        const char *nm = l->blob + l->v[i].name;
        common = !strncmp(nm, n0, k) && nm[k] == '/' && strchr(nm + k + 1, '/');
    }
    size_t top = common ? k + 1 : 0;
    if (!(l->tl->top = pd_items_strndup(out, n0, top)))
        return fl_error_set(err, -ENOMEM, "out of memory listing %s", l->tar);
    uint64_t n = sort_dedup(l, "");
    if (l->oom || l->failed)
        return listing_error(l, 1, err);
    uint64_t lo = 0, hi = n;
    if (so->part_count) {
        out->presliced = 1;
        out->job_n = n;
        if (!n || so->part_count > n)
            return 0; /* the caller says why there is nothing to pack */
        part_range(so, n, &lo, &hi);
    }
    uint64_t j = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].drop)
            continue;
        const char *nm = l->blob + l->v[i].name + top;
        size_t cl = strcspn(nm, "/");
        int32_t lab = class_label(so, kept, n_kept, cap_kept, l->tar, nm, cl, err);
        if (lab < 0)
            return err->code;
        count_format(out, &l->v[i].rec);
        if (j >= lo && j < hi && push(l, nm + cl + 1, lab, &l->v[i].rec))
            return fl_error_set(err, -ENOMEM, "out of memory listing %s", l->tar);
        j++;
    }
    return 0;
}

int pd_src_tar(const char *path, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
               fl_error *err)
{
    if (so->num_classes > 0 && !so->n_class_names)
        return fl_error_set(
            err, FL_E_INVALID,
            "%s: a tar of an ImageFolder takes its classes from "
            "its folders or inner tars (or from --classes FILE): drop --num-classes",
            path);
    tar_list l;
    memset(&l, 0, sizeof l);
    l.out = out;
    l.rc = rc;
    l.tar = path;
    char **kept = NULL; /* class names in label order (no --classes) */
    uint32_t n_kept = 0, cap_kept = 0;
    int random = 0;
    if (!(out->tar = calloc(1, sizeof *out->tar)) || !(out->tar->tar = pd_items_strdup(out, path)))
        return fl_error_set(err, -ENOMEM, "out of memory listing %s", path);
    l.tl = out->tar;
    l.tl->top = "";
    int r = pd_archive_open(out, path, &l.ar, &random, err);
    if (r)
        return r;
    l.tl->ar = l.ar;
    memset(out->name_formats, 0, sizeof out->name_formats);
    r = pd_archive_list(l.ar, 16, visit, &l, err);
    if (r && (r = listing_error(&l, r, err)))
        goto done;
    if (l.n_tars) {
        /* ImageNet layout: images beside the per-class tars are in no class */
        l.no_class += l.n;
        l.n = l.blob_len = 0;
        r = list_nested(&l, so, &kept, &n_kept, &cap_kept, err);
    } else if (l.n) {
        r = list_flat(&l, so, &kept, &n_kept, &cap_kept, err);
    }
    if (r)
        goto done;
    free(l.v); /* the listing's records: the list holds its own */
    free(l.blob);
    l.v = NULL;
    l.blob = NULL;
    l.cap = l.blob_cap = 0;
    if (!out->n && !(out->presliced && out->job_n)) {
        r = fl_error_set(err, FL_E_INVALID,
                         "%s: no images in class folders or per-class tars (a tar "
                         "of an ImageFolder holds class/<image> members, .jpg .jpeg .png .webp; "
                         "ImageNet's holds <class>.tar members)",
                         path);
        goto done;
    }
    if (l.ignored)
        fprintf(stderr,
                PD_TOOL ": note: ignored %llu member(s) of %s without an image extension "
                        "(.jpg .jpeg .png .webp ...), folders and links\n",
                (unsigned long long)l.ignored, path);
    if (l.no_class)
        fprintf(stderr,
                PD_TOOL ": note: ignored %llu image(s) of %s outside any class folder "
                        "or per-class tar\n",
                (unsigned long long)l.no_class, path);
    r = so->n_class_names ? pd_items_set_classes(out, so->class_names, so->n_class_names)
                          : pd_items_set_classes(out, kept, n_kept);
    if (r)
        r = fl_error_set(err, -ENOMEM, "out of memory listing %s", path);
    out->name_formats_set = 1;
    out->class_prefix = 1; /* names are relative to their class */
    out->form = l.n_tars ? "tar-of-tars" : "tar";
done:
    for (uint32_t i = 0; i < n_kept; i++)
        free(kept[i]);
    free(kept);
    for (size_t t = 0; t < l.n_tars; t++)
        free(l.tar_names[t]);
    free(l.tar_names);
    free(l.tars);
    free(l.v);
    free(l.blob);
    return r;
}

const pd_item *pd_tar_item(const pd_items *items, size_t i, pd_item *tmp, char **buf, size_t *cap)
{
    const pd_tar_list *t = items->tar;
    if (!buf)
        return NULL;
    memset(tmp, 0, sizeof *tmp);
    tmp->label = items->labels[i];
    const pd_tar_rec *r = &t->recs[i];
    const char *rest = items->names[i];
    const char *cls = tmp->label >= 0 && (uint32_t)tmp->label < items->num_classes
                          ? items->class_names[tmp->label]
                          : "";
    const char *inner = r->inner != UINT32_MAX ? t->inner[r->inner] : NULL;
    size_t cl = strlen(cls), rl = strlen(rest), nl = cl + 1 + rl;
    size_t need = sizeof(pd_member) + nl + 1 + strlen(t->tar) + strlen(t->top) +
                  (inner ? strlen(inner) : 0) + nl + 3;
    if (need > *cap) {
        size_t c = need < 512 ? 512 : need * 2;
        char *p = realloc(*buf, c);
        if (!p)
            return NULL;
        *buf = p;
        *cap = c;
    }
    pd_member *m = (pd_member *)(void *)*buf; /* malloc'ed: aligned for it */
    char *name = *buf + sizeof *m, *src = name + nl + 1;
    memcpy(name, cls, cl);
    name[cl] = '/';
    memcpy(name + cl + 1, rest, rl + 1);
    size_t sl = need - sizeof *m - nl - 1;
    if (inner) /* "train.tar:n01440764.tar:n01440764_10026.JPEG" */
        snprintf(src, sl, "%s:%s:%s", t->tar, inner, rest);
    else { /* "train.tar:train/n01440764/x.JPEG" (name lies before src in the buffer) */
        size_t tl = strlen(t->tar), pl = strlen(t->top);
        memcpy(src, t->tar, tl);
        src[tl] = ':';
        memcpy(src + tl + 1, t->top, pl);
        memcpy(src + tl + 1 + pl, name, nl + 1);
    }
    memset(m, 0, sizeof *m);
    m->ar = t->ar;
    m->offset = r->offset;
    m->entry = r->entry;
    m->size = r->size_format >> 8;
    m->format = (uint8_t)(r->size_format & 0xff);
    m->source = src;
    m->ticket = t->tickets && i >= t->ticket_start ? i - t->ticket_start : UINT64_MAX;
    tmp->name = name;
    tmp->member = m;
    return tmp;
}

void pd_tar_list_free(pd_tar_list *t)
{
    if (!t)
        return;
    free(t->recs);
    free(t);
}
