/* src_tar.c — an ImageFolder inside a tar file, read in place: either ImageNet's training tar (a
 * tar of per-class tars: n01440764.tar ... each holding that class's JPEGs; the class is the
 * inner tar's name) or a tar of class folders (class/.../image; one common top folder, as
 * `tar cf train.tar train/` writes, is looked through). The records are those packing the
 * extracted folder would give: the same names (class/path), classes and order (class folders
 * sorted by name, files by path component by component, hidden entries ignored).
 * Member paths are untrusted: an absolute path or a "." / ".." component is refused (it is never
 * used as a path; the record name would be one); link members with an image extension are
 * refused too (their bytes are elsewhere); other links, folders and devices are ignored. */
#include "archive_source.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fl_image.h"

typedef struct tar_img {
    const char *name;  /* record name: class/path (arena) */
    pd_member *member; /* arena */
} tar_img;

typedef struct tar_list {
    pd_items *out;
    pd_reject_ctx *rc;
    pd_archive *ar;
    const char *tar;   /* the outer tar's path */
    const char *inner; /* inner tar name (ImageNet layout) or NULL */
    const char *cls;   /* the inner tar's class, or NULL: the first path component is */
    tar_img *v;
    size_t n, cap;
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

/* "tar:inner:path" for messages. */
static const char *source_name(tar_list *l, const char *path)
{
    size_t n = strlen(l->tar) + strlen(path) + (l->inner ? strlen(l->inner) + 1 : 0) + 2;
    char *s = pd_items_memdup(l->out, NULL, n);
    if (!s)
        return NULL;
    if (l->inner)
        snprintf(s, n, "%s:%s:%s", l->tar, l->inner, path);
    else
        snprintf(s, n, "%s:%s", l->tar, path);
    return s;
}

static int reject(tar_list *l, const char *path, const char *why)
{
    const char *src = source_name(l, path);
    if (!src) {
        l->oom = 1;
        return 1;
    }
    if (pd_reject(l->rc, src, "%s", why)) {
        l->failed = 1;
        return 1;
    }
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
        l->n_tars++;
        return 0;
    }
    if (!has_image_ext(p)) {
        l->ignored++;
        return 0;
    }
    if (e->sparse)
        return reject(l, e->path, "a sparse member: its bytes are not stored in one piece");
    if (!l->cls && !strchr(p, '/')) {
        l->no_class++; /* an image outside any class folder, as in an ImageFolder's top */
        return 0;
    }
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 1024;
        tar_img *v = realloc(l->v, nc * sizeof *v);
        if (!v)
            return l->oom = 1;
        l->v = v;
        l->cap = nc;
    }
    pd_member *m = pd_items_memdup(l->out, NULL, sizeof *m);
    char *name = NULL;
    if (m) {
        size_t n = plen + (l->cls ? strlen(l->cls) + 1 : 0) + 1;
        name = pd_items_memdup(l->out, NULL, n);
        if (name) {
            if (l->cls)
                snprintf(name, n, "%s/%s", l->cls, p);
            else
                memcpy(name, p, plen + 1);
        }
    }
    if (!m || !name || !(m->source = source_name(l, p)))
        return l->oom = 1;
    m->ar = l->ar;
    m->offset = e->offset;
    m->entry = e->entry;
    m->size = e->size;
    m->ticket = UINT64_MAX;
    m->format = sniff(e->head, e->head_len);
    l->v[l->n].name = name;
    l->v[l->n].member = m;
    l->n++;
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

static int cmp_img(const void *x, const void *y)
{
    return cmp_path(((const tar_img *)x)->name, ((const tar_img *)y)->name);
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
    int random = 0;
    int r = pd_archive_open(out, path, &l.ar, &random, err);
    if (r)
        return r;
    r = pd_archive_list(l.ar, 16, visit, &l, err);
    if (r && (r = listing_error(&l, r, err)))
        goto done;
    if (l.n_tars) {
        /* ImageNet layout: each top-level tar is a class; images beside them are not */
        l.no_class += l.n;
        l.n = 0;
        for (size_t t = 0; t < l.n_tars && !r; t++) {
            size_t k = strlen(l.tar_names[t]) - 4;
            l.inner = l.tar_names[t];
            l.cls = pd_items_strndup(out, l.tar_names[t], k);
            if (!l.cls) {
                l.oom = 1;
                r = listing_error(&l, 1, err);
                break;
            }
            r = pd_archive_list_inner(l.ar, l.tars[t].offset, l.tars[t].size, l.inner, 16, visit,
                                      &l, err);
            if (r)
                r = listing_error(&l, r, err);
        }
        l.inner = NULL;
        l.cls = NULL;
        if (r)
            goto done;
    } else if (l.n) {
        /* one common top folder holding every class folder: look through it */
        size_t k = strcspn(l.v[0].name, "/");
        int common = 1;
        for (size_t i = 0; i < l.n && common; i++) {
            const char *nm = l.v[i].name;
            common = !strncmp(nm, l.v[0].name, k) && nm[k] == '/' && strchr(nm + k + 1, '/');
        }
        if (common)
            for (size_t i = 0; i < l.n; i++)
                l.v[i].name += k + 1;
    }
    if (!l.n) {
        r = fl_error_set(err, FL_E_INVALID,
                         "%s: no images in class folders or per-class tars (a tar "
                         "of an ImageFolder holds class/<image> members, .jpg .jpeg .png .webp; "
                         "ImageNet's holds <class>.tar members)",
                         path);
        goto done;
    }
    qsort(l.v, l.n, sizeof *l.v, cmp_img);
    /* duplicates: extracting would keep only the last one */
    for (size_t i = 1; i < l.n; i++) {
        if (strcmp(l.v[i].name, l.v[i - 1].name))
            continue;
        if (pd_reject(rc, l.v[i].member->source,
                      "listed twice in the tar (extracting it would keep "
                      "only one): refused")) {
            r = pd_fail_reported(err, FL_E_FORMAT);
            goto done;
        }
        l.v[i - 1].member = NULL; /* skip mode: keep the later one, as extracting would */
    }
    const int listed = so->n_class_names > 0;
    char **kept = calloc(l.n, sizeof *kept); /* class names in label order (no --classes) */
    uint32_t n_kept = 0;
    if (!kept) {
        r = fl_error_set(err, -ENOMEM, "out of memory listing %s", path);
        goto done;
    }
    for (size_t i = 0; i < l.n && !r; i++) {
        if (!l.v[i].member)
            continue;
        const char *nm = l.v[i].name;
        size_t cl = strcspn(nm, "/");
        int32_t label;
        if (listed) {
            long c = find_name(so->class_names, so->n_class_names, nm, cl);
            if (c < 0) {
                r = fl_error_set(err, FL_E_INVALID,
                                 "%s: class '%.*s' is not a class of --classes "
                                 "(%u names): add it to the list",
                                 path, (int)cl, nm, so->n_class_names);
                break;
            }
            label = (int32_t)c;
        } else {
            if (!n_kept || strlen(kept[n_kept - 1]) != cl || memcmp(kept[n_kept - 1], nm, cl))
                kept[n_kept++] = pd_items_strndup(out, nm, cl);
            if (!kept[n_kept - 1]) {
                r = fl_error_set(err, -ENOMEM, "out of memory listing %s", path);
                break;
            }
            label = (int32_t)(n_kept - 1);
        }
        pd_item it;
        memset(&it, 0, sizeof it);
        it.name = nm;
        it.member = l.v[i].member;
        it.label = label;
        if (pd_items_push(out, &it))
            r = fl_error_set(err, -ENOMEM, "out of memory listing %s", path);
    }
    if (!r) {
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
        r = listed ? pd_items_set_classes(out, so->class_names, so->n_class_names)
                   : pd_items_set_classes(out, kept, n_kept);
        if (r)
            r = fl_error_set(err, -ENOMEM, "out of memory listing %s", path);
        out->form = l.n_tars ? "tar-of-tars" : "tar";
    }
    free(kept);
done:
    for (size_t t = 0; t < l.n_tars; t++)
        free(l.tar_names[t]);
    free(l.tar_names);
    free(l.tars);
    free(l.v);
    return r;
}
