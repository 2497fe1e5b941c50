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
 * image (with --on-error skip: that image is left out and reported).
 * The file is checked whole but parsed one list element at a time (see "the file's outline"),
 * so memory follows the file's size, not the number of values in it. */
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

static int cmp_cat(const void *a, const void *b)
{
    int64_t x = ((const cat *)a)->id, y = ((const cat *)b)->id;
    return x < y ? -1 : x > y;
}

static int cmp_img(const void *a, const void *b)
{
    int64_t x = ((const img *)a)->id, y = ((const img *)b)->id;
    if (x != y)
        return x < y ? -1 : 1;
    size_t i = ((const img *)a)->index, j = ((const img *)b)->index;
    return i < j ? -1 : i > j;
}

static int get_int(const fl_jnode *o, const char *key, int64_t *v)
{
    const fl_jnode *n = fl_jget(o, key);
    if (!n || n->type != FL_J_NUMBER || !n->is_int)
        return -1;
    *v = n->ival;
    return 0;
}

/* ---- the file's outline ---------------------------------------------------------------------
 * Most of a COCO file is its "images" and "annotations" lists (COCO 2017 train: 448 MB, 860k
 * annotations). Parsed into one tree (fl_jparse keeps ~96 bytes per value) a 39 MB file of 100k
 * annotations took 500 MB; instead a scanner checks the syntax of the whole text and finds the
 * top-level members and the lists' elements, and each element is parsed alone (a tree of a few
 * dozen values, freed at once) and reduced to what the records need. */

typedef struct span {
    size_t b, e; /* [b, e) of the text; b == e: absent */
} span;

typedef struct jscan {
    const char *t;
    size_t len, p;
} jscan;

static void scan_ws(jscan *s)
{
    while (s->p < s->len &&
           (s->t[s->p] == ' ' || s->t[s->p] == '\t' || s->t[s->p] == '\n' || s->t[s->p] == '\r'))
        s->p++;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int scan_string(jscan *s)
{
    s->p++; /* the opening quote */
    while (s->p < s->len) {
        unsigned char c = (unsigned char)s->t[s->p++];
        if (c == '"')
            return 0;
        if (c < 0x20)
            return -1;
        if (c != '\\')
            continue;
        if (s->p >= s->len)
            return -1;
        char e = s->t[s->p++];
        if (e == 'u') {
            for (int k = 0; k < 4; k++, s->p++)
                if (s->p >= s->len || !strchr("0123456789abcdefABCDEF", s->t[s->p]) || !s->t[s->p])
                    return -1;
        } else if (!e || !strchr("\"\\/bfnrt", e)) {
            return -1;
        }
    }
    return -1;
}

static int scan_digits(jscan *s)
{
    if (s->p >= s->len || !is_digit(s->t[s->p]))
        return -1;
    while (s->p < s->len && is_digit(s->t[s->p]))
        s->p++;
    return 0;
}

static int scan_number(jscan *s)
{
    if (s->t[s->p] == '-')
        s->p++;
    if (s->p < s->len && s->t[s->p] == '0')
        s->p++;
    else if (scan_digits(s))
        return -1;
    if (s->p < s->len && s->t[s->p] == '.') {
        s->p++;
        if (scan_digits(s))
            return -1;
    }
    if (s->p < s->len && (s->t[s->p] == 'e' || s->t[s->p] == 'E')) {
        s->p++;
        if (s->p < s->len && (s->t[s->p] == '+' || s->t[s->p] == '-'))
            s->p++;
        if (scan_digits(s))
            return -1;
    }
    return 0;
}

/* Skip one JSON value (after white space), checking its syntax. 0, or -1 at a syntax error. */
static int scan_value(jscan *s, int depth)
{
    scan_ws(s);
    if (s->p >= s->len || depth > 64)
        return -1;
    char c = s->t[s->p];
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        s->p++;
        scan_ws(s);
        if (s->p < s->len && s->t[s->p] == close) {
            s->p++;
            return 0;
        }
        for (;;) {
            if (c == '{') {
                scan_ws(s);
                if (s->p >= s->len || s->t[s->p] != '"' || scan_string(s))
                    return -1;
                scan_ws(s);
                if (s->p >= s->len || s->t[s->p] != ':')
                    return -1;
                s->p++;
            }
            if (scan_value(s, depth + 1))
                return -1;
            scan_ws(s);
            if (s->p >= s->len)
                return -1;
            if (s->t[s->p] == ',') {
                s->p++;
                continue;
            }
            if (s->t[s->p] != close)
                return -1;
            s->p++;
            return 0;
        }
    }
    if (c == '"')
        return scan_string(s);
    if (c == '-' || is_digit(c))
        return scan_number(s);
    static const char *const lit[3] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(lit[k]);
        if (s->len - s->p >= n && !memcmp(s->t + s->p, lit[k], n)) {
            s->p += n;
            return 0;
        }
    }
    return -1;
}

/* The whole text checked and the spans of the members "images", "annotations", "categories"
 * of the top-level object found (the first of each name, as fl_jget finds). Returns 0, or -1
 * when the text is not valid JSON or not an object. */
static int coco_outline(const char *t, size_t len, span *images, span *anns, span *cats)
{
    jscan s = {t, len, 0};
    memset(images, 0, sizeof *images);
    memset(anns, 0, sizeof *anns);
    memset(cats, 0, sizeof *cats);
    scan_ws(&s);
    if (s.p >= len || t[s.p] != '{')
        return -1;
    size_t obj = s.p;
    if (scan_value(&s, 1))
        return -1;
    scan_ws(&s);
    if (s.p != len)
        return -1;
    /* valid: walk the members again, without checks */
    s.p = obj + 1;
    for (;;) {
        scan_ws(&s);
        if (t[s.p] == '}')
            return 0;
        size_t kb = s.p;
        scan_string(&s);
        size_t ke = s.p;
        scan_ws(&s);
        s.p++; /* ':' */
        scan_ws(&s);
        span v = {s.p, 0};
        scan_value(&s, 1);
        v.e = s.p;
        const char *k = t + kb + 1;
        size_t kl = ke - kb - 2;
        span *dst = kl == 6 && !memcmp(k, "images", 6)          ? images
                    : kl == 11 && !memcmp(k, "annotations", 11) ? anns
                    : kl == 10 && !memcmp(k, "categories", 10)  ? cats
                                                                : NULL;
        if (dst && dst->b == dst->e)
            *dst = v;
        scan_ws(&s);
        if (t[s.p] == ',')
            s.p++;
    }
}

/* The next element of the list at `arr` (a checked span starting with '['): its span in *el,
 * *p the scan position (arr.b + 1 before the first call). Returns 1, or 0 after the last. */
static int next_element(const char *t, span arr, size_t *p, span *el)
{
    jscan s = {t, arr.e, *p};
    scan_ws(&s);
    if (s.p >= arr.e || t[s.p] == ']')
        return 0;
    el->b = s.p;
    scan_value(&s, 1);
    el->e = s.p;
    scan_ws(&s);
    if (s.p < arr.e && t[s.p] == ',')
        s.p++;
    *p = s.p;
    return 1;
}

static int is_list(const char *t, span v) { return v.e > v.b && t[v.b] == '['; }

/* The segmentation of one annotation into the blob. Returns 0, -1 (why filled), -ENOMEM. */
static int add_segmentation(pd_segbuf *sb, const fl_jnode *seg, uint32_t value, uint32_t w,
                            uint32_t h, char *why, size_t cap)
{
    int r;
    if (seg->type == FL_J_ARRAY) {
        if ((r = pd_segbuf_push(sb, value)) || (r = pd_segbuf_push(sb, PD_SEG_POLYGONS)) ||
            (r = pd_segbuf_push(sb, (double)seg->count)) || (r = pd_segbuf_push(sb, 0)))
            return r;
        size_t q = 0;
        for (const fl_jnode *poly = seg->child; poly; poly = poly->next, q++) {
            if (poly->type != FL_J_ARRAY || poly->count % 2 || poly->count < 2) {
                snprintf(why, cap, "segmentation polygon %zu is not an even-length list of numbers",
                         q);
                return -1;
            }
            if ((r = pd_segbuf_push(sb, (double)poly->count)))
                return r;
            size_t i = 0;
            for (const fl_jnode *n = poly->child; n; n = n->next, i++) {
                double lim = i % 2 ? h : w;
                if (n->type != FL_J_NUMBER || !isfinite(n->dval) || n->dval < -POLY_FAR * lim ||
                    n->dval > (1 + POLY_FAR) * lim) {
                    snprintf(why, cap, "segmentation polygon %zu: point %zu is %s the %ux%u image",
                             q, i / 2, n->type == FL_J_NUMBER ? "far outside" : "not a number in",
                             w, h);
                    return -1;
                }
                if ((r = pd_segbuf_push(sb, n->dval)))
                    return r;
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
    if (!size || size->type != FL_J_ARRAY || size->count != 2 || !sh->is_int || !sw->is_int ||
        !counts) {
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
        if (r == -1)
            snprintf(why, cap, "%s", w2);
        return r;
    }
    if (counts->type != FL_J_ARRAY) {
        snprintf(why, cap, "RLE \"counts\" is neither a list nor a string");
        return -1;
    }
    if ((r = pd_segbuf_push(sb, (double)counts->count)))
        return r;
    uint64_t sum = 0;
    for (const fl_jnode *n = counts->child; n; n = n->next) {
        if (n->type != FL_J_NUMBER || !n->is_int || n->ival < 0 || n->ival > (int64_t)h * w) {
            snprintf(why, cap, "RLE count is not a count of pixels");
            return -1;
        }
        sum += (uint64_t)n->ival;
        if ((r = pd_segbuf_push(sb, (double)n->ival)))
            return r;
    }
    if (sum != (uint64_t)h * w) {
        snprintf(why, cap, "RLE counts add up to %llu pixels, the %ux%u image has %llu",
                 (unsigned long long)sum, w, h, (unsigned long long)h * w);
        return -1;
    }
    return 0;
}

/* ---- images, annotations, records ---------------------------------------------------------- */

/* One entry of "images". */
typedef struct coco_img {
    int64_t id;
    const char *file; /* file_name in the item list's arena, NULL when missing or empty */
    int64_t w, h;     /* -1 when missing or not an integer */
    int bad;          /* a rejected annotation or a duplicate id: the image is left out */
} coco_img;

/* One annotation that passed its checks, reduced to its record values. */
typedef struct coco_ann {
    uint32_t img; /* index into images */
    int32_t label, crowd;
    float box[4];   /* xyxy, clipped to the image */
    size_t seg_off; /* its object in the segments buffer (with --masks) */
    size_t seg_len; /* doubles; 0: no segmentation */
} coco_ann;

typedef struct coco {
    const char *file;
    const char *text;
    pd_items *out;
    pd_reject_ctx *rc;
    int masks;
    cat *cats;
    size_t ncat;
    coco_img *images; /* in file order */
    size_t nimg;
    img *ids;       /* sorted by id */
    coco_ann *anns; /* in file order */
    size_t nann, ann_cap;
    pd_segbuf seg; /* every kept annotation's object, one after the other */
} coco;

static long find_cat(const coco *c, int64_t id)
{
    size_t lo = 0, hi = c->ncat;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->cats[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->ncat && c->cats[lo].id == id ? (long)lo : -1;
}

static long find_img(const coco *c, int64_t id)
{
    size_t lo = 0, hi = c->nimg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->ids[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->nimg && c->ids[lo].id == id ? (long)c->ids[lo].index : -1;
}

/* Parse element `el` of the text alone. Returns 0 or the error of fl_jparse (-ENOMEM: the text
 * was checked already). */
static int parse_element(const coco *c, span el, fl_jdoc **doc, fl_error *err)
{
    return fl_jparse(c->text + el.b, el.e - el.b, c->file, doc, err);
}

/* The categories (sorted by id: their order is the class order). names are strdup'ed. */
static int read_categories(coco *c, span list, fl_error *err)
{
    size_t p = list.b + 1, cap = 0;
    span el;
    while (next_element(c->text, list, &p, &el)) {
        if (c->ncat == cap) {
            cap = cap ? cap * 2 : 64;
            cat *v = realloc(c->cats, cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            c->cats = v;
        }
        fl_jdoc *doc;
        int r = parse_element(c, el, &doc, err);
        if (r)
            return r;
        const fl_jnode *n = fl_jroot(doc), *nm = fl_jget(n, "name");
        cat *k = &c->cats[c->ncat];
        k->name = NULL;
        if (get_int(n, "id", &k->id) || !nm || nm->type != FL_J_STRING) {
            fl_jfree(doc);
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: categories[%zu] needs an integer \"id\" and a "
                                "\"name\"",
                                c->file, c->ncat);
        }
        k->name = strdup(nm->str);
        fl_jfree(doc);
        if (!k->name)
            return -ENOMEM;
        c->ncat++;
    }
    if (!c->ncat)
        return fl_error_set(err, FL_E_FORMAT, "%s: \"categories\" is empty", c->file);
    qsort(c->cats, c->ncat, sizeof *c->cats, cmp_cat);
    for (size_t i = 1; i < c->ncat; i++)
        if (c->cats[i].id == c->cats[i - 1].id)
            return fl_error_set(err, FL_E_FORMAT,
                                "%s: category id %lld appears twice in \"categories\"", c->file,
                                (long long)c->cats[i].id);
    return 0;
}

/* The images: id, file_name, size; sorted by id for the annotations; a duplicate id rejected
 * (the later entry). Returns 0, 1 (pd_reject said stop), or an error. */
static int read_images(coco *c, span list, fl_error *err)
{
    size_t p = list.b + 1, cap = 0;
    span el;
    while (next_element(c->text, list, &p, &el)) {
        if (c->nimg == cap) {
            cap = cap ? cap * 2 : 1024;
            coco_img *v = realloc(c->images, cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            c->images = v;
        }
        fl_jdoc *doc;
        int r = parse_element(c, el, &doc, err);
        if (r)
            return r;
        const fl_jnode *n = fl_jroot(doc), *fn = fl_jget(n, "file_name");
        coco_img *im = &c->images[c->nimg];
        memset(im, 0, sizeof *im);
        if (get_int(n, "id", &im->id)) {
            fl_jfree(doc);
            return fl_error_set(err, FL_E_FORMAT, "%s: images[%zu] has no integer \"id\"", c->file,
                                c->nimg);
        }
        if (fn && fn->type == FL_J_STRING && fn->str_len &&
            !(im->file = pd_items_strdup(c->out, fn->str))) {
            fl_jfree(doc);
            return -ENOMEM;
        }
        if (get_int(n, "width", &im->w))
            im->w = -1;
        if (get_int(n, "height", &im->h))
            im->h = -1;
        fl_jfree(doc);
        c->nimg++;
    }
    c->ids = calloc(c->nimg ? c->nimg : 1, sizeof *c->ids);
    if (!c->ids)
        return -ENOMEM;
    for (size_t i = 0; i < c->nimg; i++)
        c->ids[i].id = c->images[i].id, c->ids[i].index = i;
    qsort(c->ids, c->nimg, sizeof *c->ids, cmp_img);
    for (size_t i = 1; i < c->nimg; i++)
        if (c->ids[i].id == c->ids[i - 1].id) {
            char src[600];
            snprintf(src, sizeof src, "%s: images[%zu]", c->file, c->ids[i].index);
            if (pd_reject(c->rc, src, "image id %lld appears twice in \"images\"",
                          (long long)c->ids[i].id))
                return 1;
            c->images[c->ids[i].index].bad = 1;
        }
    return 0;
}

static int image_usable(const coco_img *im)
{
    return im->file && im->w > 0 && im->h > 0 && im->w <= 65535 && im->h <= 65535;
}

/* One annotation checked and reduced (a). Returns 0 (kept, or rejected with its image left out
 * and reported), 1 (pd_reject said stop), -ENOMEM. */
static int read_annotation(coco *c, const fl_jnode *a)
{
    int64_t aid = -1, iid, cid = 0;
    get_int(a, "id", &aid);
    long ii;
    if (get_int(a, "image_id", &iid) || (ii = find_img(c, iid)) < 0) {
        char src[600];
        snprintf(src, sizeof src, "%s: annotation id %lld", c->file, (long long)aid);
        return pd_reject(c->rc, src, "image_id is not the id of an entry of \"images\"") ? 1 : 0;
    }
    coco_img *im = &c->images[ii];
    /* an image already left out, or one its own checks will reject when the records are made */
    if (im->bad || !image_usable(im))
        return 0;
    char asrc[700];
    snprintf(asrc, sizeof asrc, "%s: annotation id %lld (image id %lld, %.400s)", c->file,
             (long long)aid, (long long)im->id, im->file);
#define BAD(...)                                                                                   \
    do {                                                                                           \
        im->bad = 1;                                                                               \
        return pd_reject(c->rc, asrc, __VA_ARGS__) ? 1 : 0;                                        \
    } while (0)
    if (get_int(a, "category_id", &cid))
        BAD("has no integer \"category_id\"");
    long ci = find_cat(c, cid);
    if (ci < 0)
        BAD("category_id %lld is not in \"categories\"", (long long)cid);
    const fl_jnode *ic = fl_jget(a, "iscrowd");
    if (ic && (ic->type != FL_J_NUMBER || !ic->is_int || (ic->ival != 0 && ic->ival != 1)))
        BAD("\"iscrowd\" is not 0 or 1");
    const fl_jnode *bb = fl_jget(a, "bbox");
    double v[4];
    if (!bb || bb->type != FL_J_ARRAY || bb->count != 4)
        BAD("\"bbox\" is not [x, y, width, height]");
    int i = 0;
    for (const fl_jnode *x = bb->child; x; x = x->next, i++) {
        if (x->type != FL_J_NUMBER || !isfinite(x->dval))
            BAD("\"bbox\" holds a value that is not a number");
        v[i] = x->dval;
    }
    if (v[2] < 0 || v[3] < 0)
        BAD("\"bbox\" [%g, %g, %g, %g] has a negative width or height", v[0], v[1], v[2], v[3]);
    double x0 = v[0], y0 = v[1], x1 = v[0] + v[2], y1 = v[1] + v[3], w = (double)im->w,
           h = (double)im->h;
    if (x0 < -BOX_SLACK || y0 < -BOX_SLACK || x1 > w + BOX_SLACK || y1 > h + BOX_SLACK)
        BAD("\"bbox\" [%g, %g, %g, %g] lies outside the %lldx%lld image", v[0], v[1], v[2], v[3],
            (long long)im->w, (long long)im->h);
    size_t seg_off = c->seg.n, seg_len = 0;
    if (c->masks) {
        const fl_jnode *seg = fl_jget(a, "segmentation");
        if (seg) { /* a box without a mask paints nothing */
            char why[300];
            int r = add_segmentation(&c->seg, seg, (uint32_t)ci + 1, (uint32_t)im->w,
                                     (uint32_t)im->h, why, sizeof why);
            if (r == -ENOMEM)
                return r;
            if (r) {
                c->seg.n = seg_off;
                BAD("%s", why);
            }
            seg_len = c->seg.n - seg_off;
        }
    }
#undef BAD
    if (c->nann == c->ann_cap) {
        size_t cap = c->ann_cap ? c->ann_cap * 2 : 1024;
        coco_ann *n = realloc(c->anns, cap * sizeof *n);
        if (!n)
            return -ENOMEM;
        c->anns = n;
        c->ann_cap = cap;
    }
    coco_ann *o = &c->anns[c->nann++];
    o->img = (uint32_t)ii;
    o->label = (int32_t)ci;
    o->crowd = ic ? (int32_t)ic->ival : 0;
    o->box[0] = (float)fmin(fmax(x0, 0), w);
    o->box[1] = (float)fmin(fmax(y0, 0), h);
    o->box[2] = (float)fmin(fmax(x1, 0), w);
    o->box[3] = (float)fmin(fmax(y1, 0), h);
    o->seg_off = seg_off;
    o->seg_len = seg_len;
    return 0;
}

static int read_annotations(coco *c, span list, fl_error *err)
{
    size_t p = list.b + 1;
    span el;
    while (next_element(c->text, list, &p, &el)) {
        fl_jdoc *doc;
        int r = parse_element(c, el, &doc, err);
        if (r)
            return r;
        r = read_annotation(c, fl_jroot(doc));
        fl_jfree(doc);
        if (r)
            return r;
    }
    return 0;
}

/* Image i and its kept annotations (anns[order[0..n)], file order) into an item. Returns 0
 * (added, or rejected and skipped), 1 (stop), -ENOMEM. */
static int add_image(coco *c, const pd_source_opts *so, size_t i, const size_t *order, size_t n,
                     float *boxes, int32_t *labels, int32_t *crowd)
{
    pd_items *out = c->out;
    const coco_img *im = &c->images[i];
    char src[600];
    snprintf(src, sizeof src, "%s: image id %lld", c->file, (long long)im->id);
    if (!im->file)
        return pd_reject(c->rc, src, "has no \"file_name\"") ? 1 : 0;
    snprintf(src, sizeof src, "%s: image id %lld (%.400s)", c->file, (long long)im->id, im->file);
    if (!image_usable(im))
        return pd_reject(c->rc, src, "needs \"width\" and \"height\" (1..65535)") ? 1 : 0;
    if (!so->allow_outside_root && pd_path_leaves(so->root, im->file))
        return pd_reject(c->rc, src,
                         "file_name is outside --root %s (an absolute path, or one "
                         "climbing with ..): refused (--allow-outside-root packs it)",
                         so->root)
                   ? 1
                   : 0;
    size_t nseg = 0, seg_total = 1;
    for (size_t k = 0; k < n; k++) {
        const coco_ann *a = &c->anns[order[k]];
        memcpy(boxes + 4 * k, a->box, 16);
        labels[k] = a->label;
        crowd[k] = a->crowd;
        if (a->seg_len)
            nseg++, seg_total += a->seg_len;
    }
    char *path = pd_path_join(so->root, im->file);
    if (!path)
        return -ENOMEM;
    pd_item it = {0};
    it.name = im->file;
    it.path = pd_items_strdup(out, path);
    free(path);
    it.values = pd_items_new_values(out);
    it.src_width = (uint32_t)im->w;
    it.src_height = (uint32_t)im->h;
    if (!it.path || !it.values)
        return -ENOMEM;
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
        /* the segments blob: [number of objects] then each object as read */
        pd_value *vm = &it.values[4];
        double *blob = pd_items_memdup(out, NULL, seg_total * sizeof(double));
        if (!blob)
            return -ENOMEM;
        blob[0] = (double)nseg;
        size_t o = 1;
        for (size_t k = 0; k < n; k++) {
            const coco_ann *a = &c->anns[order[k]];
            if (!a->seg_len)
                continue;
            memcpy(blob + o, c->seg.v + a->seg_off, a->seg_len * sizeof(double));
            o += a->seg_len;
        }
        vm->kind = PD_VAL_SEGMENTS;
        vm->data = blob;
        vm->len = seg_total;
    }
    return pd_items_push(out, &it) ? -ENOMEM : 0;
}

int pd_src_coco(const char *file, const pd_source_opts *so, pd_reject_ctx *rc, pd_items *out,
                fl_error *err)
{
    if (!so->root)
        return fl_error_set(err, FL_E_INVALID,
                            "--coco needs --root IMAGE_DIR (the folder the "
                            "images' file_name values are relative to)");
    uint8_t *data = NULL;
    size_t len = 0;
    int r = pd_read_file(file, 0, (size_t)8 << 30, &data, &len, err);
    if (r)
        return r;
    coco c = {.file = file, .text = (const char *)data, .out = out, .rc = rc, .masks = so->masks};
    size_t *order = NULL, *start = NULL;
    float *boxes = NULL;
    int32_t *labels = NULL, *crowd = NULL;
    char **names = NULL;
    span jimages, janns, jcats;
    if (coco_outline(c.text, len, &jimages, &janns, &jcats)) {
        /* fl_jparse says where and why (it fails where the scanner did) */
        fl_jdoc *doc = NULL;
        r = fl_jparse(c.text, len, file, &doc, err);
        fl_jfree(doc);
        if (!r)
            r = fl_error_set(err, FL_E_FORMAT,
                             "%s: not a COCO instances file: the top level "
                             "is not an object",
                             file);
        goto done;
    }
    if (!is_list(c.text, jimages) || !is_list(c.text, jcats) ||
        (janns.e > janns.b && !is_list(c.text, janns))) {
        r = fl_error_set(err, FL_E_FORMAT,
                         "%s: not a COCO instances file: needs \"images\" and "
                         "\"categories\" lists (and \"annotations\")",
                         file);
        goto done;
    }
    if ((r = read_categories(&c, jcats, err)) || (r = read_images(&c, jimages, err)) ||
        (janns.e > janns.b && (r = read_annotations(&c, janns, err)))) {
        if (r == 1)
            r = pd_fail_reported(err, FL_E_FORMAT);
        else if (r == -ENOMEM)
            goto oom;
        goto done;
    }
    free(data); /* everything needed was copied out */
    data = NULL;
    c.text = NULL;
    /* annotations grouped by image, file order kept within an image (counting sort) */
    start = calloc(c.nimg + 1, sizeof *start);
    order = calloc(c.nann ? c.nann : 1, sizeof *order);
    if (!start || !order)
        goto oom;
    for (size_t i = 0; i < c.nann; i++)
        start[c.anns[i].img + 1]++;
    size_t maxn = 0;
    for (size_t i = 0; i < c.nimg; i++) {
        if (start[i + 1] > maxn)
            maxn = start[i + 1];
        start[i + 1] += start[i];
    }
    for (size_t i = 0; i < c.nann; i++)
        order[start[c.anns[i].img]++] = i;
    for (size_t i = c.nimg; i > 0; i--)
        start[i] = start[i - 1]; /* back to each group's first */
    start[0] = 0;
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
    if (!boxes || !labels || !crowd)
        goto oom;
    for (size_t i = 0; i < c.nimg; i++) {
        if (c.images[i].bad)
            continue;
        int k =
            add_image(&c, so, i, order + start[i], start[i + 1] - start[i], boxes, labels, crowd);
        if (k < 0)
            goto oom;
        if (k) {
            r = pd_fail_reported(err, FL_E_FORMAT);
            goto done;
        }
    }
    names = calloc(c.ncat, sizeof *names);
    if (!names)
        goto oom;
    for (size_t i = 0; i < c.ncat; i++)
        names[i] = (char *)c.cats[i].name;
    if (pd_items_set_classes(out, names, (uint32_t)c.ncat))
        goto oom;
    out->form = "coco";
    r = 0;
    goto done;
oom:
    r = fl_error_set(err, -ENOMEM, "out of memory reading %s", file);
done:
    free(data);
    free(names);
    free(boxes);
    free(labels);
    free(crowd);
    free(order);
    free(start);
    for (size_t i = 0; i < c.ncat; i++)
        free((char *)c.cats[i].name);
    free(c.cats);
    free(c.images);
    free(c.ids);
    free(c.anns);
    free(c.seg.v);
    return r;
}
