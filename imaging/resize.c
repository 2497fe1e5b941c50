/* resize.c — separable antialiased resampling (triangle filter whose support widens with the
 * shrink factor, like PIL's BILINEAR), fixed point and therefore bit-identical on every run and
 * thread: a horizontal pass into 8.8 fixed-point rows, then a vertical pass. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

#define WBITS 14 /* filter weights sum to 1 << WBITS */

typedef struct span {
    int32_t start, n;
} span;

/* Filter geometry along one axis: window [x0, x0+len) of a source axis of `size` pixels. */
typedef struct axis {
    double x0, scale, fscale, support;
    int32_t lo, hi, ksize;
} axis;

static int axis_init(axis *a, double x0, double len, uint32_t size, uint32_t out) {
    if (!(x0 >= 0) || !(len > 0) || x0 + len > size + 1e-6 || out == 0) return -1;
    a->x0 = x0;
    a->scale = len / out;
    a->fscale = a->scale > 1.0 ? a->scale : 1.0;
    a->support = a->fscale; /* triangle support 1, widened by the shrink factor */
    /* Taps never reach outside the window: a crop resamples exactly as if it were cut out first. */
    a->lo = (int32_t)floor(x0);
    a->hi = (int32_t)ceil(x0 + len - 1e-9);
    if (a->hi > (int32_t)size) a->hi = (int32_t)size;
    if (a->lo >= a->hi) a->lo = a->hi - 1;
    a->ksize = (int32_t)ceil(a->support) * 2 + 2;
    if (a->ksize > a->hi - a->lo) a->ksize = a->hi - a->lo;
    return 0;
}

/* Spans and fixed-point weights for each output coordinate. */
static void axis_weights(const axis *a, uint32_t out, span *sp, int16_t *wt) {
    double fw[512];
    double *w = a->ksize <= 512 ? fw : malloc(sizeof(double) * (size_t)a->ksize);
    for (uint32_t o = 0; o < out; o++) {
        int16_t *q = wt + (size_t)o * a->ksize;
        memset(q, 0, sizeof(int16_t) * (size_t)a->ksize);
        double center = a->x0 + (o + 0.5) * a->scale;
        int32_t xmin = (int32_t)floor(center - a->support + 0.5);
        int32_t xmax = (int32_t)floor(center + a->support + 0.5);
        if (xmin < a->lo) xmin = a->lo;
        if (xmax > a->hi) xmax = a->hi;
        if (xmax - xmin > a->ksize) xmax = xmin + a->ksize;
        if (xmax <= xmin) { /* degenerate: nearest pixel */
            xmin = (int32_t)floor(center);
            if (xmin < a->lo) xmin = a->lo;
            if (xmin >= a->hi) xmin = a->hi - 1;
            xmax = xmin + 1;
        }
        int32_t n = xmax - xmin;
        double sum = 0;
        for (int32_t k = 0; k < n; k++) {
            double t = fabs((xmin + k - center + 0.5) / a->fscale);
            w[k] = t < 1.0 ? 1.0 - t : 0.0;
            sum += w[k];
        }
        if (!(sum > 0)) { /* window narrower than a pixel between taps: take the nearest */
            for (int32_t k = 0; k < n; k++) w[k] = 0;
            int32_t k = (int32_t)floor(center) - xmin;
            w[k < 0 ? 0 : k >= n ? n - 1 : k] = 1;
            sum = 1;
        }
        int32_t total = 0, kmax = 0;
        for (int32_t k = 0; k < n; k++) {
            q[k] = (int16_t)floor(w[k] / sum * (1 << WBITS) + 0.5);
            total += q[k];
            if (q[k] > q[kmax]) kmax = k;
        }
        q[kmax] = (int16_t)(q[kmax] + ((1 << WBITS) - total)); /* exact unit sum */
        sp[o].start = xmin;
        sp[o].n = n;
    }
    if (w != fw) free(w);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

typedef struct layout {
    axis ax, ay;
    size_t off_xs, off_ys, off_xw, off_yw, off_tmp, off_acc, total;
    int32_t rows; /* source rows the vertical pass can touch */
} layout;

static int make_layout(layout *L, uint32_t sw, uint32_t sh, const double win[4], uint32_t dw,
                       uint32_t dh, uint32_t channels) {
    if (axis_init(&L->ax, win[0], win[2], sw, dw) || axis_init(&L->ay, win[1], win[3], sh, dh))
        return -1;
    L->rows = L->ay.hi - L->ay.lo;
    size_t o = 0;
    L->off_xs = o, o += align64(sizeof(span) * dw);
    L->off_ys = o, o += align64(sizeof(span) * dh);
    L->off_xw = o, o += align64(sizeof(int16_t) * (size_t)dw * L->ax.ksize);
    L->off_yw = o, o += align64(sizeof(int16_t) * (size_t)dh * L->ay.ksize);
    L->off_tmp = o, o += align64(sizeof(uint16_t) * (size_t)L->rows * dw * channels);
    L->off_acc = o, o += align64(sizeof(int32_t) * (size_t)dw * channels);
    L->total = o + 64; /* room to align the base */
    return 0;
}

size_t fl_resize_window_scratch_size(uint32_t sw, uint32_t sh, const double win[4], uint32_t dw,
                                     uint32_t dh, uint32_t channels) {
    layout L;
    if (make_layout(&L, sw, sh, win, dw, dh, channels)) return 0;
    return L.total;
}

size_t fl_resize_scratch_size(uint32_t sw, uint32_t sh, uint32_t dw, uint32_t dh,
                              uint32_t channels) {
    double win[4] = {0, 0, sw, sh};
    return fl_resize_window_scratch_size(sw, sh, win, dw, dh, channels);
}

/* One source row → dw fixed-point (value << 8) pixels, mirrored when flip. */
static void hpass_row(const uint8_t *src, uint16_t *out, uint32_t dw, uint32_t ch, const span *xs,
                      const int16_t *xw, int32_t kx, int flip) {
    for (uint32_t o = 0; o < dw; o++) {
        const int16_t *w = xw + (size_t)o * kx;
        const uint8_t *p = src + (size_t)xs[o].start * ch;
        int32_t n = xs[o].n;
        uint16_t *t = out + (size_t)(flip ? dw - 1 - o : o) * ch;
        if (ch == 3) {
            int32_t r = 0, g = 0, b = 0;
            for (int32_t k = 0; k < n; k++, p += 3) {
                r += w[k] * p[0];
                g += w[k] * p[1];
                b += w[k] * p[2];
            }
            t[0] = (uint16_t)((r + 32) >> 6);
            t[1] = (uint16_t)((g + 32) >> 6);
            t[2] = (uint16_t)((b + 32) >> 6);
        } else if (ch == 1) {
            int32_t v = 0;
            for (int32_t k = 0; k < n; k++) v += w[k] * p[k];
            t[0] = (uint16_t)((v + 32) >> 6);
        } else {
            for (uint32_t c = 0; c < ch; c++) {
                int32_t v = 0;
                for (int32_t k = 0; k < n; k++) v += w[k] * p[(size_t)k * ch + c];
                t[c] = (uint16_t)((v + 32) >> 6);
            }
        }
    }
}

int fl_resize_window(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride,
                     uint32_t channels, const double win[4], uint8_t *dst, uint32_t dw,
                     uint32_t dh, size_t dstride, int flip, void *scratch, size_t scratch_len,
                     fl_error *err) {
    if (!src || !dst || sw == 0 || sh == 0 || dw == 0 || dh == 0 || channels == 0 || channels > 4 ||
        sstride < (size_t)sw * channels || dstride < (size_t)dw * channels)
        return fl_error_set(err, FL_E_INVALID, "resize: bad arguments (%ux%u -> %ux%u, %u channels)",
                            sw, sh, dw, dh, channels);
    layout L;
    if (make_layout(&L, sw, sh, win, dw, dh, channels))
        return fl_error_set(err, FL_E_INVALID, "resize: window %.2f,%.2f %.2fx%.2f outside %ux%u",
                            win[0], win[1], win[2], win[3], sw, sh);
    /* Plain copy when nothing is resampled. */
    if (!flip && win[0] == 0 && win[1] == 0 && win[2] == dw && win[3] == dh) {
        for (uint32_t y = 0; y < dh; y++)
            memcpy(dst + y * dstride, src + y * sstride, (size_t)dw * channels);
        return 0;
    }
    void *mem = NULL;
    if (!scratch || scratch_len < L.total) {
        if (scratch) return fl_error_set(err, FL_E_INVALID, "resize: scratch of %zu bytes, need %zu",
                                         scratch_len, L.total);
        mem = malloc(L.total);
        if (!mem) return fl_error_set(err, -ENOMEM, "resize: out of memory");
        scratch = mem;
    }
    uint8_t *base = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    span *xs = (span *)(void *)(base + L.off_xs), *ys = (span *)(void *)(base + L.off_ys);
    int16_t *xw = (int16_t *)(void *)(base + L.off_xw), *yw = (int16_t *)(void *)(base + L.off_yw);
    uint16_t *tmp = (uint16_t *)(void *)(base + L.off_tmp);
    int32_t *acc = (int32_t *)(void *)(base + L.off_acc);
    axis_weights(&L.ax, dw, xs, xw);
    axis_weights(&L.ay, dh, ys, yw);

    /* Horizontal pass over only the source rows some output row uses. */
    int32_t r0 = ys[0].start, r1 = ys[0].start + ys[0].n;
    for (uint32_t o = 1; o < dh; o++) {
        if (ys[o].start < r0) r0 = ys[o].start;
        if (ys[o].start + ys[o].n > r1) r1 = ys[o].start + ys[o].n;
    }
    size_t rowlen = (size_t)dw * channels;
    for (int32_t r = r0; r < r1; r++)
        hpass_row(src + (size_t)r * sstride, tmp + (size_t)(r - L.ay.lo) * rowlen, dw, channels, xs,
                  xw, L.ax.ksize, flip);

    /* Vertical pass: accumulate whole rows so the inner loop vectorizes. */
    for (uint32_t o = 0; o < dh; o++) {
        const int16_t *w = yw + (size_t)o * L.ay.ksize;
        const uint16_t *t = tmp + (size_t)(ys[o].start - L.ay.lo) * rowlen;
        int32_t w0 = w[0];
        for (size_t x = 0; x < rowlen; x++) acc[x] = w0 * t[x];
        for (int32_t k = 1; k < ys[o].n; k++) {
            const uint16_t *tk = t + (size_t)k * rowlen;
            int32_t wk = w[k];
            for (size_t x = 0; x < rowlen; x++) acc[x] += wk * tk[x];
        }
        uint8_t *d = dst + o * dstride;
        for (size_t x = 0; x < rowlen; x++) {
            int32_t v = (acc[x] + (1 << 21)) >> 22;
            d[x] = (uint8_t)(v > 255 ? 255 : v);
        }
    }
    free(mem);
    return 0;
}

int fl_resize(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride, uint32_t channels,
              uint8_t *dst, uint32_t dw, uint32_t dh, size_t dstride, int flip, void *scratch,
              size_t scratch_len, fl_error *err) {
    double win[4] = {0, 0, sw, sh};
    return fl_resize_window(src, sw, sh, sstride, channels, win, dst, dw, dh, dstride, flip,
                            scratch, scratch_len, err);
}
