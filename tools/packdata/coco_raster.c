/* coco_raster.c — COCO segmentations into a semantic mask: polygons rasterised as pycocotools'
 * rleFrPoly does (so masks match what COCO users get from annToMask, pixel for pixel), RLE
 * (uncompressed counts, or the compressed string form decoded as rleFrString does) painted
 * column-major. Everything bounds-checked: blobs and strings come from untrusted JSON. */
#include "pd_coco.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pd_segbuf_push(pd_segbuf *b, double x)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        double *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
    return 0;
}

static int why_set(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return -1;
}

int pd_coco_rle_string(pd_segbuf *b, const char *s, size_t len, uint32_t h, uint32_t w, char *why,
                       size_t why_cap)
{
    size_t at = b->n;
    if (pd_segbuf_push(b, 0))
        return -ENOMEM;
    size_t p = 0, m = 0;
    uint64_t sum = 0;
    while (p < len) {
        int64_t x = 0;
        int k = 0, more = 1;
        while (more) {
            if (p >= len)
                return why_set(why, why_cap, "RLE string ends inside a count");
            if (k > 12)
                return why_set(why, why_cap, "RLE string: a count is too long");
            int c = (unsigned char)s[p] - 48;
            if (c < 0 || c > 63)
                return why_set(why, why_cap, "RLE string: byte %zu is not an RLE character", p);
            x |= (int64_t)(c & 0x1f) << (5 * k);
            more = c & 0x20;
            p++;
            k++;
            if (!more && (c & 0x10))
                x |= (int64_t)(~(uint64_t)0 << (5 * k)); /* sign-extend */
        }
        if (m > 2)
            x += (int64_t)b->v[b->n - 2];
        if (x < 0 || x > (int64_t)h * w)
            return why_set(why, why_cap, "RLE string: count %zu is %lld", m, (long long)x);
        sum += (uint64_t)x;
        if (pd_segbuf_push(b, (double)x))
            return -ENOMEM;
        m++;
    }
    if (sum != (uint64_t)h * w)
        return why_set(why, why_cap, "RLE counts add up to %llu pixels, its size %ux%u is %llu",
                       (unsigned long long)sum, w, h, (unsigned long long)h * w);
    b->v[at] = (double)m;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Paint the runs of ones of an RLE (counts alternate zeros/ones, column-major). */
static int paint_counts(const uint32_t *cnt, size_t m, uint32_t w, uint32_t h, uint8_t *mask,
                        uint32_t elem, uint32_t value, char *why, size_t cap)
{
    uint64_t pos = 0, total = (uint64_t)w * h;
    for (size_t i = 0; i < m; i++) {
        uint64_t end = pos + cnt[i];
        if (end > total)
            return why_set(why, cap, "RLE runs past its %ux%u size", w, h);
        if (i & 1) {
            for (uint64_t k = pos; k < end; k++) {
                uint32_t x = (uint32_t)(k / h), y = (uint32_t)(k % h);
                size_t o = (size_t)y * w + x;
                if (elem == 2)
                    ((uint16_t *)(void *)mask)[o] = (uint16_t)value;
                else
                    mask[o] = (uint8_t)value;
            }
        }
        pos = end;
    }
    return 0;
}

/* pycocotools' rleFrPoly (maskApi.c), step for step: the same integer rounding, so the same
 * pixels. k points (xy[2k]); counts into *out (malloc'ed, *m of them). */
static int poly_to_rle(const double *xy, size_t k, uint32_t h, uint32_t w, uint32_t **out,
                       size_t *mo)
{
    const double scale = 5;
    int64_t *x = malloc(sizeof *x * (k + 1)), *y = malloc(sizeof *y * (k + 1));
    int64_t *u = NULL, *v = NULL;
    uint32_t *a = NULL, *b = NULL;
    int rc = -ENOMEM;
    if (!x || !y)
        goto out;
    for (size_t j = 0; j < k; j++)
        x[j] = (int64_t)(scale * xy[j * 2 + 0] + .5);
    x[k] = x[0];
    for (size_t j = 0; j < k; j++)
        y[j] = (int64_t)(scale * xy[j * 2 + 1] + .5);
    y[k] = y[0];
    size_t m = 0;
    for (size_t j = 0; j < k; j++) {
        int64_t dx = llabs(x[j] - x[j + 1]), dy = llabs(y[j] - y[j + 1]);
        m += (size_t)(dx > dy ? dx : dy) + 1;
    }
    u = malloc(sizeof *u * (m ? m : 1));
    v = malloc(sizeof *v * (m ? m : 1));
    if (!u || !v)
        goto out;
    m = 0;
    for (size_t j = 0; j < k; j++) {
        int64_t xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1], t;
        int64_t dx = llabs(xe - xs), dy = llabs(ys - ye);
        int flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
        if (flip) {
            t = xs, xs = xe, xe = t;
            t = ys, ys = ye, ye = t;
        }
        double s = dx >= dy ? (double)(ye - ys) / (double)dx : (double)(xe - xs) / (double)dy;
        if (dx >= dy) {
            for (int64_t d = 0; d <= dx; d++) {
                t = flip ? dx - d : d;
                u[m] = t + xs;
                /* a repeated point (dx = dy = 0) divides 0 by 0 in pycocotools; its column
                 * equals its neighbours', so its row is never read: take ys */
                v[m] = dx ? (int64_t)(int)((double)ys + s * (double)t + .5) : ys;
                m++;
            }
        } else {
            for (int64_t d = 0; d <= dy; d++) {
                t = flip ? dy - d : d;
                v[m] = t + ys;
                u[m] = (int64_t)(int)((double)xs + s * (double)t + .5);
                m++;
            }
        }
    }
    /* points where the boundary crosses a column centre, downsampled */
    size_t kk = m;
    m = 0;
    a = malloc(sizeof *a * (kk + 1));
    if (!a)
        goto out;
    for (size_t j = 1; j < kk; j++) {
        if (u[j] == u[j - 1])
            continue;
        double xd = (double)(u[j] < u[j - 1] ? u[j] : u[j] - 1);
        xd = (xd + .5) / scale - .5;
        if (floor(xd) != xd || xd < 0 || xd > (double)w - 1)
            continue;
        double yd = (double)(v[j] < v[j - 1] ? v[j] : v[j - 1]);
        yd = (yd + .5) / scale - .5;
        if (yd < 0)
            yd = 0;
        else if (yd > h)
            yd = h;
        yd = ceil(yd);
        a[m++] = (uint32_t)((int64_t)xd * (int64_t)h + (int64_t)yd);
    }
    kk = m;
    a[kk++] = h * w;
    qsort(a, kk, sizeof *a, cmp_u32);
    uint32_t p = 0;
    for (size_t j = 0; j < kk; j++) {
        uint32_t t = a[j];
        a[j] -= p;
        p = t;
    }
    b = malloc(sizeof *b * kk);
    if (!b)
        goto out;
    size_t j = 0;
    m = 0;
    b[m++] = a[j++];
    while (j < kk) {
        if (a[j] > 0) {
            b[m++] = a[j++];
        } else {
            j++;
            if (j < kk)
                b[m - 1] += a[j++];
        }
    }
    *out = b;
    *mo = m;
    b = NULL;
    rc = 0;
out:
    free(x);
    free(y);
    free(u);
    free(v);
    free(a);
    free(b);
    return rc;
}

int pd_coco_paint(const double *blob, size_t len, uint32_t width, uint32_t height, void *mask,
                  uint32_t elem, char *why, size_t why_cap)
{
    size_t p = 0;
#define NEED(n)                                                                                    \
    do {                                                                                           \
        if ((n) > len - p)                                                                         \
            return why_set(why, why_cap, "segments blob truncated");                               \
    } while (0)
    NEED(1);
    size_t nobj = (size_t)blob[p++];
    for (size_t o = 0; o < nobj; o++) {
        NEED(4);
        uint32_t value = (uint32_t)blob[p], kind = (uint32_t)blob[p + 1];
        double a = blob[p + 2], b = blob[p + 3];
        p += 4;
        if (kind == PD_SEG_POLYGONS) {
            for (size_t q = 0; q < (size_t)a; q++) {
                NEED(1);
                size_t nc = (size_t)blob[p++];
                NEED(nc);
                if (nc % 2)
                    return why_set(why, why_cap, "polygon with an odd number of coordinates");
                uint32_t *cnt = NULL;
                size_t m = 0;
                int r = poly_to_rle(blob + p, nc / 2, height, width, &cnt, &m);
                if (r)
                    return r;
                r = paint_counts(cnt, m, width, height, mask, elem, value, why, why_cap);
                free(cnt);
                if (r)
                    return r;
                p += nc;
            }
        } else if (kind == PD_SEG_RLE) {
            if ((uint32_t)a != height || (uint32_t)b != width)
                return why_set(why, why_cap, "RLE size %ux%u is not the image's %ux%u", (uint32_t)b,
                               (uint32_t)a, width, height);
            NEED(1);
            size_t m = (size_t)blob[p++];
            NEED(m);
            uint32_t *cnt = malloc(sizeof *cnt * (m ? m : 1));
            if (!cnt)
                return -ENOMEM;
            for (size_t i = 0; i < m; i++) {
                double c = blob[p + i];
                if (!(c >= 0 && c <= 4294967295.0)) {
                    free(cnt);
                    return why_set(why, why_cap, "RLE count %zu is %g", i, c);
                }
                cnt[i] = (uint32_t)c;
            }
            int r = paint_counts(cnt, m, width, height, mask, elem, value, why, why_cap);
            free(cnt);
            if (r)
                return r;
            p += m;
        } else {
            return why_set(why, why_cap, "segments blob: unknown kind %u", kind);
        }
    }
#undef NEED
    return 0;
}
