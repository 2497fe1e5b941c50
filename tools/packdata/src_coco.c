/* src_coco.c — COCO instances JSON (`packdata pack --coco INSTANCES.json --root IMAGE_DIR`):
 * one record per entry of "images" (those without annotations too, with 0 boxes), fields image,
 * boxes (COCO's [x, y, w, h] as x0 = x, y0 = y, x1 = x + w, y1 = y + h, float32 pixels),
 * labels (per box: the index of its category in the categories sorted by id, which are the
 * dataset's classes), iscrowd (per box), and with --masks a semantic mask (0 background, class
 * index + 1; uint8 up to 254 classes, else uint16) rasterised by the worker from the polygons /
 * RLE carried as a segments blob (pd_coco.h).
 * Checks, each naming the annotation and its image: a box more than 1 px outside the image
 * (within that slack it is clipped), a negative width or height, an unknown category or image
 * id, a malformed segmentation; duplicate image or category ids. A bad annotation rejects its
 * image (with --on-error skip: that image is left out and reported). */
#include "packdata.h"
#include "pd_coco.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fl_json.h"

/* A box may stick out of its image by this much (annotation tools round); it is clipped. */
#define BOX_SLACK 1.0
/* Polygon points may lie this far outside the image (multiples of its sides); further out is
 * an error, which also bounds the rasteriser's work. */
#define POLY_FAR 1.0

typedef struct cat {
    int64_t id;
    const char *name;
} cat;

typedef struct img {
    int64_t id;
    size_t index; /* position in "images" */
} img;

static int cmp_cat(const void *a, const void *b) {
    int64_t x = ((const cat *)a)->id, y = ((const cat *)b)->id;
    return x < y ? -1 : x > y;
}

static int cmp_img(const void *a, const void *b) {
    int64_t x = ((const img *)a)->id, y = ((const img *)b)->id;
    if (x != y) return x < y ? -1 : 1;
    size_t i = ((const img *)a)->index, j = ((const img *)b)->index;
    return i < j ? -1 : i > j;
}

static int get_int(const fl_jnode *o, const char *key, int64_t *v) {
    const fl_jnode *n = fl_jget(o, key);
    if (!n || n->type != FL_J_NUMBER || !n->is_int) return -1;
    *v = n->ival;
    return 0;
}

/* Per-image annotation state while grouping. */
typedef struct ann_group {
    size_t first, n; /* into the order array */
    int bad;         /* a rejected annotation: the image is left out */
} ann_group;

typedef struct coco {
    const char *file;
    pd_items *out;
    pd_reject_ctx *rc;
    int masks;
    cat *cats;
    size_t ncat;
    const fl_jnode **images; /* the "images" entries, in file order */
    size_t nimg;
    img *ids;                /* sorted by id */
} coco;

static long find_cat(const coco *c, int64_t id) {
    size_t lo = 0, hi = c->ncat;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->cats[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->ncat && c->cats[lo].id == id ? (long)lo : -1;
}

static long find_img(const coco *c, int64_t id) {
    size_t lo = 0, hi = c->nimg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->ids[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->nimg && c->ids[lo].id == id ? (long)c->ids[lo].index : -1;
}

/* The segmentation of one annotation into the blob. Returns 0, -1 (why filled), -ENOMEM. */
static int add_segmentation(pd_segbuf *sb, const fl_jnode *seg, uint32_t value, uint32_t w,
                            uint32_t h, char *why, size_t cap) {
    int r;
    if (seg->type == FL_J_ARRAY) {
        if ((r = pd_segbuf_push(sb, value)) || (r = pd_segbuf_push(sb, PD_SEG_POLYGONS)) ||
            (r = pd_segbuf_push(sb, (double)seg->count)) || (r = pd_segbuf_push(sb, 0)))
            return r;
        size_t q = 0;
        for (const fl_jnode *poly = seg->child; poly; poly = poly->next, q++) {
            if (poly->type != FL_J_ARRAY || poly->count % 2 || poly->count < 2) {
                snprintf(why, cap, "segmentation polygon %zu is not an even-length list of numbers", q);
                return -1;
            }
            if ((r = pd_segbuf_push(sb, (double)poly->count))) return r;
            size_t i = 0;
            for (const fl_jnode *n = poly->child; n; n = n->next, i++) {
                double lim = i % 2 ? h : w;
                if (n->type != FL_J_NUMBER || !isfinite(n->dval) || n->dval < -POLY_FAR * lim ||
                    n->dval > (1 + POLY_FAR) * lim) {
                    snprintf(why, cap, "segmentation polygon %zu: point %zu is %s the %ux%u image",
                             q, i / 2, n->type == FL_J_NUMBER ? "far outside" : "not a number in", w, h);
                    return -1;
                }
                if ((r = pd_segbuf_push(sb, n->dval))) return r;
            }
        }
        return 0;
    }
    if (seg->type != FL_J_OBJECT) {
        snprintf(why, cap, "segmentation is neither a list of polygons nor an RLE object");
        return -1;
    }
    const fl_jnode *size = fl_jget(seg, "size"), *counts = fl_jget(seg, "counts");
    const fl_jnode *sh = fl_jat(size, 0), *sw = fl_jat(size, 1);
    if (!size || size->type != FL_J_ARRAY || size->count != 2 || !sh->is_int || !sw->is_int || !counts) {
        snprintf(why, cap, "RLE segmentation needs \"size\": [height, width] and \"counts\"");
        return -1;
    }
    if (sh->ival != h || sw->ival != w) {
        snprintf(why, cap, "RLE size [%lld, %lld] is not the image's [%u, %u]", (long long)sh->ival,
                 (long long)sw->ival, h, w);
        return -1;
    }
    if ((r = pd_segbuf_push(sb, value)) || (r = pd_segbuf_push(sb, PD_SEG_RLE)) ||
        (r = pd_segbuf_push(sb, h)) || (r = pd_segbuf_push(sb, w)))
        return r;
    if (counts->type == FL_J_STRING) {
        char w2[200];
        r = pd_coco_rle_string(sb, counts->str, counts->str_len, h, w, w2, sizeof w2);
        if (r == -1) snprintf(why, cap, "%s", w2);
        return r;
    }
    if (counts->type != FL_J_ARRAY) {
        snprintf(why, cap, "RLE \"counts\" is neither a list nor a string");
        return -1;
    }
    if ((r = pd_segbuf_push(sb, (double)counts->count))) return r;
    uint64_t sum = 0;
    for (const fl_jnode *n = counts->child; n; n = n->next) {
        if (n->type != FL_J_NUMBER || !n->is_int || n->ival < 0 || n->ival > (int64_t)h * w) {
            snprintf(why, cap, "RLE count is not a count of pixels");
            return -1;
        }
        sum += (uint64_t)n->ival;
        if ((r = pd_segbuf_push(sb, (double)n->ival))) return r;
    }
    if (sum != (uint64_t)h * w) {
        snprintf(why, cap, "RLE counts add up to %llu pixels, the %ux%u image has %llu",
                 (unsigned long long)sum, w, h, (unsigned long long)h * w);
        return -1;
    }
    return 0;
}

/* One image and its annotations (order[first..first+n) index `anns`) into an item. Returns 0
 * (added or rejected-and-skipped), 1 (stop), -ENOMEM. */
static int add_image(coco *c, const pd_source_opts *so, const fl_jnode *im, const fl_jnode **anns,
                     const size_t *order, size_t n, pd_segbuf *sb, float *boxes, int32_t *labels,
                     int32_t *crowd) {
    pd_items *out = c->out;
    int64_t id = 0, w = 0, h = 0;
    get_int(im, "id", &id);
    const fl_jnode *fn = fl_jget(im, "file_name");
    char src[600];
    snprintf(src, sizeof src, "%s: image id %lld", c->file, (long long)id);
    if (!fn || fn->type != FL_J_STRING || !fn->str_len)
        return pd_reject(c->rc, src, "has no \"file_name\"") ? 1 : 0;
    snprintf(src, sizeof src, "%s: image id %lld (%.400s)", c->file, (long long)id, fn->str);
    if (get_int(im, "width", &w) || get_int(im, "height", &h) || w <= 0 || h <= 0 || w > 65535 ||
        h > 65535)
        return pd_reject(c->rc, src, "needs \"width\" and \"height\" (1..65535)") ? 1 : 0;
    sb->n = 0;
    if (c->masks && pd_segbuf_push(sb, 0)) return -ENOMEM;
    size_t nseg = 0;
    for (size_t k = 0; k < n; k++) {
        const fl_jnode *a = anns[order[k]];
        int64_t aid = -1, cid = 0, isc = 0;
        get_int(a, "id", &aid);
        char asrc[700];
        snprintf(asrc, sizeof asrc, "%s: annotation id %lld (image id %lld, %.400s)", c->file,
                 (long long)aid, (long long)id, fn->str);
        const fl_jnode *bb = fl_jget(a, "bbox");
        if (get_int(a, "category_id", &cid))
            return pd_reject(c->rc, asrc, "has no integer \"category_id\"") ? 1 : 0;
        long ci = find_cat(c, cid);
        if (ci < 0)
            return pd_reject(c->rc, asrc, "category_id %lld is not in \"categories\"", (long long)cid) ? 1 : 0;
        const fl_jnode *ic = fl_jget(a, "iscrowd");
        if (ic && (ic->type != FL_J_NUMBER || !ic->is_int || (ic->ival != 0 && ic->ival != 1)))
            return pd_reject(c->rc, asrc, "\"iscrowd\" is not 0 or 1") ? 1 : 0;
        isc = ic ? ic->ival : 0;
        double v[4];
        if (!bb || bb->type != FL_J_ARRAY || bb->count != 4)
            return pd_reject(c->rc, asrc, "\"bbox\" is not [x, y, width, height]") ? 1 : 0;
        int i = 0;
        for (const fl_jnode *x = bb->child; x; x = x->next, i++) {
            if (x->type != FL_J_NUMBER || !isfinite(x->dval))
                return pd_reject(c->rc, asrc, "\"bbox\" holds a value that is not a number") ? 1 : 0;
            v[i] = x->dval;
        }
        if (v[2] < 0 || v[3] < 0)
            return pd_reject(c->rc, asrc, "\"bbox\" [%g, %g, %g, %g] has a negative width or height",
                             v[0], v[1], v[2], v[3]) ? 1 : 0;
        double x0 = v[0], y0 = v[1], x1 = v[0] + v[2], y1 = v[1] + v[3];
        if (x0 < -BOX_SLACK || y0 < -BOX_SLACK || x1 > (double)w + BOX_SLACK || y1 > (double)h + BOX_SLACK)
            return pd_reject(c->rc, asrc, "\"bbox\" [%g, %g, %g, %g] lies outside the %lldx%lld image",
                             v[0], v[1], v[2], v[3], (long long)w, (long long)h) ? 1 : 0;
        boxes[4 * k + 0] = (float)fmin(fmax(x0, 0), (double)w);
        boxes[4 * k + 1] = (float)fmin(fmax(y0, 0), (double)h);
        boxes[4 * k + 2] = (float)fmin(fmax(x1, 0), (double)w);
        boxes[4 * k + 3] = (float)fmin(fmax(y1, 0), (double)h);
        labels[k] = (int32_t)ci;
        crowd[k] = (int32_t)isc;
        if (c->masks) {
            const fl_jnode *seg = fl_jget(a, "segmentation");
            if (!seg) continue; /* a box without a mask paints nothing */
            char why[300];
            int r = add_segmentation(sb, seg, (uint32_t)ci + 1, (uint32_t)w, (uint32_t)h, why, sizeof why);
            if (r == -ENOMEM) return r;
            if (r) return pd_reject(c->rc, asrc, "%s", why) ? 1 : 0;
            nseg++;
        }
    }
    if (c->masks) sb->v[0] = (double)nseg;
    /* the item */
    char *path = pd_path_join(so->root, fn->str);
    if (!path) return -ENOMEM;
    pd_item it = {0};
    it.name = pd_items_strdup(out, fn->str);
    it.path = pd_items_strdup(out, path);
    free(path);
    it.values = pd_items_new_values(out);
    it.src_width = (uint32_t)w;
    it.src_height = (uint32_t)h;
    if (!it.name || !it.path || !it.values) return -ENOMEM;
    pd_value *vb = &it.values[1], *vl = &it.values[2], *vc = &it.values[3];
    if (n) {
        vb->kind = vl->kind = vc->kind = PD_VAL_DATA;
        vb->count = vl->count = vc->count = (uint32_t)n;
        vb->len = n * 16;
        vl->len = vc->len = n * 4;
        if (!(vb->data = pd_items_memdup(out, boxes, vb->len)) ||
            !(vl->data = pd_items_memdup(out, labels, vl->len)) ||
            !(vc->data = pd_items_memdup(out, crowd, vc->len)))
            return -ENOMEM;
    }
    if (c->masks) {
        pd_value *vm = &it.values[4];
        vm->kind = PD_VAL_SEGMENTS;
        vm->len = sb->n;
        if (!(vm->data = pd_items_memdup(out, sb->v, sb->n * sizeof(double)))) return -ENOMEM;
    }
    return pd_items_push(out, &it) ? -ENOMEM : 0;
}

int pd_src_coco(const char *file, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                fl_error *err) {
    if (!so->root)
        return fl_error_set(err, FL_E_INVALID, "--coco needs --root IMAGE_DIR (the folder the "
                            "images' file_name values are relative to)");
    uint8_t *data = NULL;
    size_t len = 0;
    int r = pd_read_file(file, 0, (size_t)8 << 30, &data, &len, err);
    if (r) return r;
    fl_jdoc *doc = NULL;
    r = fl_jparse((const char *)data, len, file, &doc, err);
    free(data);
    if (r) return r;
    coco c = {.file = file, .out = out, .rc = rc, .masks = so->masks};
    const fl_jnode *root = fl_jroot(doc);
    const fl_jnode *jimages = fl_jget(root, "images"), *janns = fl_jget(root, "annotations"),
                   *jcats = fl_jget(root, "categories");
    const fl_jnode **anns = NULL;
    size_t *order = NULL, *start = NULL;
    ann_group *groups = NULL;
    float *boxes = NULL;
    int32_t *labels = NULL, *crowd = NULL;
    pd_segbuf sb = {0};
    char **names = NULL;
    if (!jimages || jimages->type != FL_J_ARRAY || !jcats || jcats->type != FL_J_ARRAY ||
        (janns && janns->type != FL_J_ARRAY)) {
        r = fl_error_set(err, FL_E_FORMAT, "%s: not a COCO instances file: needs \"images\" and "
                         "\"categories\" lists (and \"annotations\")", file);
        goto done;
    }
    /* categories, sorted by id: their order is the class order */
    c.ncat = jcats->count;
    c.cats = calloc(c.ncat ? c.ncat : 1, sizeof *c.cats);
    if (!c.cats) goto oom;
    size_t i = 0;
    for (const fl_jnode *n = jcats->child; n; n = n->next, i++) {
        const fl_jnode *nm = fl_jget(n, "name");
        if (get_int(n, "id", &c.cats[i].id) || !nm || nm->type != FL_J_STRING) {
            r = fl_error_set(err, FL_E_FORMAT, "%s: categories[%zu] needs an integer \"id\" and a "
                             "\"name\"", file, i);
            goto done;
        }
        c.cats[i].name = nm->str;
    }
    qsort(c.cats, c.ncat, sizeof *c.cats, cmp_cat);
    for (i = 1; i < c.ncat; i++)
        if (c.cats[i].id == c.cats[i - 1].id) {
            r = fl_error_set(err, FL_E_FORMAT, "%s: category id %lld appears twice in \"categories\"",
                             file, (long long)c.cats[i].id);
            goto done;
        }
    if (!c.ncat) {
        r = fl_error_set(err, FL_E_FORMAT, "%s: \"categories\" is empty", file);
        goto done;
    }
    /* images by id */
    c.nimg = jimages->count;
    c.images = calloc(c.nimg ? c.nimg : 1, sizeof *c.images);
    c.ids = calloc(c.nimg ? c.nimg : 1, sizeof *c.ids);
    if (!c.images || !c.ids) goto oom;
    i = 0;
    for (const fl_jnode *n = jimages->child; n; n = n->next, i++) {
        c.images[i] = n;
        c.ids[i].index = i;
        if (get_int(n, "id", &c.ids[i].id)) {
            r = fl_error_set(err, FL_E_FORMAT, "%s: images[%zu] has no integer \"id\"", file, i);
            goto done;
        }
    }
    qsort(c.ids, c.nimg, sizeof *c.ids, cmp_img);
    groups = calloc(c.nimg ? c.nimg : 1, sizeof *groups);
    if (!groups) goto oom;
    for (i = 1; i < c.nimg; i++)
        if (c.ids[i].id == c.ids[i - 1].id) {
            /* the later entry is the bad one: keep the first */
            char src[600];
            snprintf(src, sizeof src, "%s: images[%zu]", file, c.ids[i].index);
            if (pd_reject(rc, src, "image id %lld appears twice in \"images\"", (long long)c.ids[i].id)) {
                r = pd_fail_reported(err, FL_E_FORMAT);
                goto done;
            }
            groups[c.ids[i].index].bad = 1;
        }
    /* annotations grouped by image, file order kept within an image (counting sort) */
    size_t na = janns ? janns->count : 0;
    anns = calloc(na ? na : 1, sizeof *anns);
    order = calloc(na ? na : 1, sizeof *order);
    long *owner = calloc(na ? na : 1, sizeof *owner);
    start = calloc(c.nimg + 1, sizeof *start);
    if (!anns || !order || !owner || !start) {
        free(owner);
        goto oom;
    }
    i = 0;
    size_t maxn = 0;
    for (const fl_jnode *n = janns ? janns->child : NULL; n; n = n->next, i++) {
        anns[i] = n;
        int64_t iid, aid = -1;
        get_int(n, "id", &aid);
        if (get_int(n, "image_id", &iid) || (owner[i] = find_img(&c, iid)) < 0) {
            char src[600];
            snprintf(src, sizeof src, "%s: annotation id %lld", file, (long long)aid);
            owner[i] = -1;
            if (pd_reject(rc, src, "image_id is not the id of an entry of \"images\"")) {
                free(owner);
                r = pd_fail_reported(err, FL_E_FORMAT);
                goto done;
            }
            continue;
        }
        groups[owner[i]].n++;
    }
    for (i = 0; i < c.nimg; i++) {
        start[i + 1] = start[i] + groups[i].n;
        groups[i].first = start[i];
        if (groups[i].n > maxn) maxn = groups[i].n;
        groups[i].n = 0;
    }
    for (i = 0; i < na; i++)
        if (owner[i] >= 0) {
            ann_group *g = &groups[owner[i]];
            order[g->first + g->n++] = i;
        }
    free(owner);
    /* the schema */
    out->num_fields = 0;
    pd_items_add_field(out, "image", FL_FIELD_IMAGE, FL_DTYPE_U8, 0, NULL, -1);
    pd_items_add_field(out, "boxes", FL_FIELD_BOXES, FL_DTYPE_F32, 0, NULL, -1);
    pd_items_add_field(out, "labels", FL_FIELD_INT_LIST, FL_DTYPE_I32, 0, NULL, 1);
    pd_items_add_field(out, "iscrowd", FL_FIELD_INT_LIST, FL_DTYPE_I32, 0, NULL, 1);
    if (c.masks) {
        /* 255 stays free for an "ignore" value, as segmentation losses commonly use it */
        pd_items_add_field(out, "mask", FL_FIELD_MASK, c.ncat <= 254 ? FL_DTYPE_U8 : FL_DTYPE_U16,
                           0, NULL, 0);
    }
    boxes = malloc((maxn ? maxn : 1) * 16);
    labels = malloc((maxn ? maxn : 1) * 4);
    crowd = malloc((maxn ? maxn : 1) * 4);
    if (!boxes || !labels || !crowd) goto oom;
    for (i = 0; i < c.nimg; i++) {
        if (groups[i].bad) continue;
        int k = add_image(&c, so, c.images[i], anns, order + groups[i].first, groups[i].n, &sb,
                          boxes, labels, crowd);
        if (k < 0) goto oom;
        if (k) {
            r = pd_fail_reported(err, FL_E_FORMAT);
            goto done;
        }
    }
    names = calloc(c.ncat, sizeof *names);
    if (!names) goto oom;
    for (i = 0; i < c.ncat; i++) names[i] = (char *)c.cats[i].name;
    if (pd_items_set_classes(out, names, (uint32_t)c.ncat)) goto oom;
    out->form = "coco";
    r = 0;
    goto done;
oom:
    r = fl_error_set(err, -ENOMEM, "out of memory reading %s", file);
done:
    free(names);
    free(sb.v);
    free(boxes);
    free(labels);
    free(crowd);
    free(anns);
    free(order);
    free(start);
    free(groups);
    free(c.cats);
    free(c.images);
    free(c.ids);
    fl_jfree(doc);
    return r;
}
