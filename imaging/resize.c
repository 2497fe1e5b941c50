/* resize.c — separable antialiased resampling (triangle filter whose support widens with the
 * shrink factor, like PIL's BILINEAR), fixed point and therefore bit-identical on every run and
 * thread: a vertical pass into 8-bit rows, then a horizontal pass, 4 rows at a time (AVX-512,
 * AVX2 and SSSE3 kernels give the same bytes as the portable C; see fl_resize_set_simd_limit). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

#define WBITS 14 /* filter weights sum to 1 << WBITS */

typedef struct span {
    int32_t start, n;
} span;

/* The AVX2 RGB kernel's view of one destination pixel when every span fits in 4 taps: byte
 * offset of its first tap in the row and its 4 weights (zero past the span), in destination
 * order (flip applied), so the inner loop does no index arithmetic. */
typedef struct hplan {
    int32_t off;
    int16_t w[4];
} hplan;

/* The AVX2 1-channel kernel's view of 4 consecutive destination pixels whose taps (at most 4
 * each) lie within 16 bytes of a row: the first byte, and for tap pairs (0, 1) and (2, 3) a
 * pshufb control that puts each pixel's two bytes into one int32 lane as int16, and the 4
 * pixels' weight pairs for those lanes. */
typedef struct gplan {
    int32_t base, unused[3];
    uint8_t ctrl[2][16];
    int32_t w[2][4];
} gplan;

/* The AVX-512 kernel's view of 16 consecutive destination bytes (any channel count; the last
 * group of a row may be short) whose taps lie within 64 bytes of a row from `base`: for each byte,
 * as int32 lane i, ctrl bytes 4i and 4i + 2 index its tap pair (0, 1) from base (pair p adds
 * p × 2 × channels) and w[p][i] holds that pair's two weights. Taps past a span carry weight 0
 * (their index may wrap: vpermb reads it modulo 64); bytes past the row, index 0 and weight 0. */
#define ZPAIRS 3
typedef struct zplan {
    uint8_t ctrl[64];
    int32_t w[ZPAIRS][16];
    int32_t base, last, unused[14]; /* last: the highest byte a tap reads, while planning */
} zplan;

/* Filter geometry along one axis: window [x0, x0+len) of a source axis of `size` pixels. */
typedef struct axis {
    double x0, scale, fscale, support;
    int32_t lo, hi, ksize;
} axis;

static int axis_init(axis *a, double x0, double len, uint32_t size, uint32_t out)
{
    if (!(x0 >= 0) || !(len > 0) || x0 + len > size + 1e-6 || out == 0)
        return -1;
    a->x0 = x0;
    a->scale = len / out;
    a->fscale = a->scale > 1.0 ? a->scale : 1.0;
    a->support = a->fscale; /* triangle support 1, widened by the shrink factor */
    /* Taps never reach outside the window: a crop resamples exactly as if it were cut out first. */
    a->lo = (int32_t)floor(x0);
    a->hi = (int32_t)ceil(x0 + len - 1e-9);
    if (a->hi > (int32_t)size)
        a->hi = (int32_t)size;
    if (a->lo >= a->hi)
        a->lo = a->hi - 1;
    a->ksize = (int32_t)ceil(a->support) * 2 + 2;
    if (a->ksize > a->hi - a->lo)
        a->ksize = a->hi - a->lo;
    return 0;
}

/* floor() for the values axis_weights sees (well inside int32 range): the same integer as
 * (int32_t)floor(v), without a libm call on baseline x86-64. */
static inline int32_t floor_i32(double v)
{
    int32_t t = (int32_t)v; /* rounds toward zero */
    return t - (t > v);
}

/* Span and fixed-point weights of output coordinate o. Weights are rounded by their running sum
 * (q_k = round(C_k+1) - round(C_k)), so they are never negative and add up to exactly
 * 1 << WBITS even when thousands of taps each carry a fraction of a unit. Every double below is
 * computed by the same expressions in the same order as the first version of this function (and
 * as axis_weights_avx2), so the integer weights, and the output bytes, never change; each tap's
 * filter value is computed once and kept (up to FTAPS taps; wider filters compute it again). */
#define FTAPS 64
static void axis_weight_one(const axis *a, double inv, uint32_t o, span *sp, int16_t *q,
                            int32_t wstride)
{
    double f[FTAPS];
    double center = a->x0 + (o + 0.5) * a->scale;
    int32_t xmin = floor_i32(center - a->support + 0.5);
    int32_t xmax = floor_i32(center + a->support + 0.5);
    if (xmin < a->lo)
        xmin = a->lo;
    if (xmax > a->hi)
        xmax = a->hi;
    if (xmax - xmin > a->ksize)
        xmax = xmin + a->ksize;
    if (xmax <= xmin) { /* degenerate: nearest pixel */
        xmin = floor_i32(center);
        if (xmin < a->lo)
            xmin = a->lo;
        if (xmin >= a->hi)
            xmin = a->hi - 1;
        xmax = xmin + 1;
    }
    int32_t n = xmax - xmin;
    double sum = 0;
    for (int32_t k = 0; k < n; k++) {
        double t = fabs((xmin + k - center + 0.5) * inv);
        double v = t < 1.0 ? 1.0 - t : 0.0;
        sum += v;
        if (k < FTAPS)
            f[k] = v;
    }
    if (!(sum > 0)) { /* no tap inside the filter: take the nearest pixel */
        memset(q, 0, sizeof(int16_t) * (size_t)wstride);
        int32_t k = floor_i32(center) - xmin;
        q[k < 0 ? 0 : k >= n ? n - 1 : k] = 1 << WBITS;
    } else {
        double norm = (1 << WBITS) / sum, c = 0;
        int32_t prev = 0;
        for (int32_t k = 0; k < n; k++) {
            double v;
            if (k < FTAPS) {
                v = f[k];
            } else {
                double t = fabs((xmin + k - center + 0.5) * inv);
                v = t < 1.0 ? 1.0 - t : 0.0;
            }
            c += v * norm;
            int32_t r = k == n - 1 ? 1 << WBITS : (int32_t)(c + 0.5);
            if (r > 1 << WBITS)
                r = 1 << WBITS;
            q[k] = (int16_t)(r - prev);
            prev = r;
        }
        /* Zero weights up to the stride: the SIMD kernels run whole tap pairs over them. */
        for (int32_t k = n; k < wstride; k++)
            q[k] = 0;
    }
    sp->start = xmin;
    sp->n = n;
}

/* Spans and weights of every output coordinate (wstride weights each). */
static void axis_weights(const axis *a, uint32_t out, span *sp, int16_t *wt, int32_t wstride)
{
    double inv = 1.0 / a->fscale;
    for (uint32_t o = 0; o < out; o++)
        axis_weight_one(a, inv, o, sp + o, wt + (size_t)o * wstride, wstride);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Rows per block: the vertical pass fills BLOCK_ROWS intermediate rows, the horizontal pass turns
 * them into output rows right away, while they are still in L1 (the AVX2 kernel takes 4 rows). */
#define BLOCK_ROWS 4

typedef struct layout {
    axis ax, ay;
    int32_t kx2; /* horizontal taps rounded up to even: the SIMD kernel takes them in pairs */
    size_t tw;   /* bytes of one intermediate row: window columns × channels */
    size_t off_xs, off_ys, off_xw, off_yw, off_plan, off_gplan, off_zplan, off_tmp, off_acc, total;
} layout;

static int make_layout(layout *L, uint32_t sw, uint32_t sh, const double win[4], uint32_t dw,
                       uint32_t dh, uint32_t channels)
{
    if (axis_init(&L->ax, win[0], win[2], sw, dw) || axis_init(&L->ay, win[1], win[3], sh, dh))
        return -1;
    L->kx2 = (L->ax.ksize + 1) & ~1;
    L->tw = (size_t)(L->ax.hi - L->ax.lo) * channels;
    size_t o = 0;
    L->off_xs = o, o += align64(sizeof(span) * dw);
    L->off_ys = o, o += align64(sizeof(span) * dh);
    L->off_xw = o, o += align64(sizeof(int16_t) * (size_t)dw * L->kx2);
    L->off_yw = o, o += align64(sizeof(int16_t) * (size_t)dh * L->ay.ksize);
    L->off_plan = o, o += align64(sizeof(hplan) * dw);
    L->off_gplan = o, o += align64(sizeof(gplan) * ((dw + 3) / 4));
    L->off_zplan = o, o += sizeof(zplan) * (((size_t)dw * channels + 15) / 16);
    /* +64: the SIMD kernels read up to 63 bytes past the last pixel of the last row. */
    L->off_tmp = o, o += align64(L->tw * (dh < BLOCK_ROWS ? dh : BLOCK_ROWS) + 64);
    L->off_acc = o, o += align64(sizeof(int32_t) * L->tw);
    L->total = o + 64; /* room to align the base */
    return 0;
}

size_t fl_resize_window_scratch_size(uint32_t sw, uint32_t sh, const double win[4], uint32_t dw,
                                     uint32_t dh, uint32_t channels)
{
    layout L;
    if (make_layout(&L, sw, sh, win, dw, dh, channels))
        return 0;
    return L.total;
}

size_t fl_resize_scratch_size(uint32_t sw, uint32_t sh, uint32_t dw, uint32_t dh, uint32_t channels)
{
    double win[4] = {0, 0, sw, sh};
    return fl_resize_window_scratch_size(sw, sh, win, dw, dh, channels);
}

static inline uint8_t round_px(int32_t acc)
{
    int32_t v = (acc + (1 << (WBITS - 1))) >> WBITS;
    return (uint8_t)(v > 255 ? 255 : v);
}

/* Vertical pass first (it vectorizes across the whole row): output rows [o0, o1) of the window's
 * columns into tmp (row o at tmp + (o - o0) * tw), rounded to 8 bits like PIL does between its
 * passes. Portable version; vpass_avx2 computes the same integer sums. */
static void vpass(const uint8_t *src, size_t sstride, size_t col0, size_t tw, const span *ys,
                  const int16_t *yw, int32_t ky, uint32_t o0, uint32_t o1, uint8_t *tmp,
                  int32_t *acc)
{
    for (uint32_t o = o0; o < o1; o++) {
        const int16_t *w = yw + (size_t)o * ky;
        const uint8_t *s = src + (size_t)ys[o].start * sstride + col0;
        uint8_t *t = tmp + (size_t)(o - o0) * tw;
        int32_t n = ys[o].n;
        if (n == 1 || (n == 2 && w[1] == 0)) { /* identity row (no vertical scaling) */
            memcpy(t, s, tw);
            continue;
        }
        int32_t w0 = w[0], w1 = w[1];
        const uint8_t *s1 = s + sstride;
        for (size_t x = 0; x < tw; x++)
            acc[x] = w0 * s[x] + w1 * s1[x];
        for (int32_t k = 2; k < n; k++) {
            const uint8_t *sk = s + (size_t)k * sstride;
            int32_t wk = w[k];
            for (size_t x = 0; x < tw; x++)
                acc[x] += wk * sk[x];
        }
        for (size_t x = 0; x < tw; x++)
            t[x] = round_px(acc[x]);
    }
}

/* Horizontal pass, portable, inlined for each channel count (1 to 4) so that the channel loop
 * unrolls into registers, and for a fixed tap count nfix (2 to 4) when every span is that short:
 * the taps past a span carry weight 0, and a loop of constant length does not mispredict its
 * exit at every pixel (nfix 0: each pixel's own span). Fixed counts read at most 3 pixels past a
 * row's last one (the block buffer is padded). */
__attribute__((always_inline)) static inline void
hpass_scalar_ch(const uint8_t *t, uint8_t *d, uint32_t dw, const span *xs, const int16_t *xw,
                int32_t kx2, int flip, const uint32_t ch, const int32_t nfix)
{
    for (uint32_t o = 0; o < dw; o++) {
        const int16_t *w = xw + (size_t)o * kx2;
        const uint8_t *p = t + (size_t)xs[o].start * ch;
        int32_t n = nfix ? nfix : xs[o].n;
        uint8_t *q = d + (size_t)(flip ? dw - 1 - o : o) * ch;
        int32_t v[4] = {0, 0, 0, 0};
        for (int32_t k = 0; k < n; k++, p += ch)
            for (uint32_t c = 0; c < ch; c++)
                v[c] += w[k] * p[c];
        for (uint32_t c = 0; c < ch; c++)
            q[c] = round_px(v[c]);
    }
}

#define HPASS_SCALAR_NFIX(ch)                                                                      \
    (nfix == 2   ? hpass_scalar_ch(t, d, dw, xs, xw, kx2, flip, ch, 2)                             \
     : nfix == 3 ? hpass_scalar_ch(t, d, dw, xs, xw, kx2, flip, ch, 3)                             \
     : nfix == 4 ? hpass_scalar_ch(t, d, dw, xs, xw, kx2, flip, ch, 4)                             \
                 : hpass_scalar_ch(t, d, dw, xs, xw, kx2, flip, ch, 0))
/* nfix: 2, 3 or 4 when every span has at most that many taps (and kx2 >= nfix), else 0. */
static void hpass_scalar(const uint8_t *t, uint8_t *d, uint32_t dw, uint32_t ch, const span *xs,
                         const int16_t *xw, int32_t kx2, int flip, int32_t nfix)
{
    switch (ch) {
    case 1: HPASS_SCALAR_NFIX(1); break;
    case 2: HPASS_SCALAR_NFIX(2); break;
    case 3: HPASS_SCALAR_NFIX(3); break;
    default: HPASS_SCALAR_NFIX(4); break;
    }
}
#undef HPASS_SCALAR_NFIX

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FL_HAVE_SSSE3_KERNEL 1
/* Horizontal pass for RGB with SSSE3: two taps per step; pshufb turns the 6 bytes of pixels
 * k, k+1 into int16 pairs (r_k, r_k+1, g_k, g_k+1, b_k, b_k+1) and pmaddwd multiplies them
 * by (w_k, w_k+1) and adds, giving the same integer sums as hpass_scalar. Reads up to 5 bytes
 * past a row's last pixel (the intermediate buffer is padded). */
__attribute__((target("ssse3"))) static void hpass_rgb_ssse3(const uint8_t *t, uint8_t *d,
                                                             uint32_t dw, const span *xs,
                                                             const int16_t *xw, int32_t kx2,
                                                             int flip)
{
    const __m128i shuf = _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const __m128i half = _mm_set1_epi32(1 << (WBITS - 1));
    for (uint32_t o = 0; o < dw; o++) {
        const int16_t *w = xw + (size_t)o * kx2;
        const uint8_t *p = t + (size_t)xs[o].start * 3;
        int32_t n = xs[o].n;
        __m128i acc = half;
        for (int32_t k = 0; k < n; k += 2, p += 6) {
            __m128i px = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)(const void *)p), shuf);
            int32_t wp;
            memcpy(&wp, w + k, 4); /* (w_k, w_k+1); w_n is 0 when n is odd */
            acc = _mm_add_epi32(acc, _mm_madd_epi16(px, _mm_set1_epi32(wp)));
        }
        acc = _mm_srai_epi32(acc, WBITS);
        acc = _mm_packs_epi32(acc, acc);
        acc = _mm_packus_epi16(acc, acc);
        uint32_t v = (uint32_t)_mm_cvtsi128_si32(acc);
        uint8_t *q = d + (size_t)(flip ? dw - 1 - o : o) * 3;
        q[0] = (uint8_t)v, q[1] = (uint8_t)(v >> 8), q[2] = (uint8_t)(v >> 16);
    }
}

#define FL_AVX2        __attribute__((target("avx2")))
#define FL_AVX2_INLINE __attribute__((target("avx2"), always_inline)) static inline

/* Rows p and p + tw, 16 bytes each, in the two 128-bit lanes. */
FL_AVX2_INLINE __m256i load_2x16(const uint8_t *p, size_t tw)
{
    return _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p)),
        _mm_loadu_si128((const __m128i *)(const void *)(p + tw)), 1);
}

/* Rounding without a constant in the int32 sums: for 0 <= sum < 2^22 (weights add up to 2^14,
 * pixels are at most 255), (sum + 2^13) >> 14 == ((sum >> 7) + 64) >> 7, as 2^13 is a multiple
 * of 2^7. The kernels shift by 7 (the result fits int16), pack, and pmulhrsw by 256 gives
 * (x * 256 + 2^14) >> 15 == (x + 64) >> 7: one rounding per 16 values instead of an add per 8. */
#define PRESHIFT 7
FL_AVX2_INLINE __m256i round_packed(__m256i x16)
{
    return _mm256_mulhrs_epi16(x16, _mm256_set1_epi16(1 << (15 - (WBITS - PRESHIFT))));
}

/* Tap pair (w[0], w[1]) broadcast to every int32 lane; w[1] is 0 past a span's last tap. */
FL_AVX2_INLINE __m256i weight_pair(const int16_t *w)
{
    int32_t wp;
    memcpy(&wp, w, 4);
    return _mm256_set1_epi32(wp);
}

/* One output pixel of four rows: int32 sums, already shifted down. 16-byte loads hold five RGB
 * pixels, so taps k..k+3 come from one load and two pshufb (pixels k, k+1 at byte 0, pixels k+2,
 * k+3 at byte 6). np is 1 or 2: that many tap pairs for every pixel (extra taps carry weight 0);
 * np 0: as many pairs as this pixel's span needs. Integer sums of non-negative terms, so the
 * order of the additions does not matter: the same sums as hpass_scalar. Reads at most 13 bytes
 * past the last pixel of a row (the block buffer is padded). */
FL_AVX2_INLINE void rgb_px_x4(const uint8_t *p, size_t tw, const int16_t *w, int32_t n, int np,
                              __m256i *r01, __m256i *r23)
{
    const __m256i sh0 = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
                                         0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const __m256i sh1 =
        _mm256_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1, 6, -1, 9, -1,
                         7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
    __m256i a01 = _mm256_setzero_si256(), a23 = a01;
    if (np) {
        __m256i x01 = load_2x16(p, tw), x23 = load_2x16(p + 2 * tw, tw);
        __m256i w0 = weight_pair(w);
        a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(_mm256_shuffle_epi8(x01, sh0), w0));
        a23 = _mm256_add_epi32(a23, _mm256_madd_epi16(_mm256_shuffle_epi8(x23, sh0), w0));
        if (np == 2) {
            __m256i w1 = weight_pair(w + 2);
            a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(_mm256_shuffle_epi8(x01, sh1), w1));
            a23 = _mm256_add_epi32(a23, _mm256_madd_epi16(_mm256_shuffle_epi8(x23, sh1), w1));
        }
    } else {
        int32_t k = 0;
        for (; k + 2 < n; k += 4, p += 12) { /* taps k..k+3; w[k+3] exists: the stride is even */
            __m256i x01 = load_2x16(p, tw), x23 = load_2x16(p + 2 * tw, tw);
            __m256i w0 = weight_pair(w + k), w1 = weight_pair(w + k + 2);
            a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(_mm256_shuffle_epi8(x01, sh0), w0));
            a23 = _mm256_add_epi32(a23, _mm256_madd_epi16(_mm256_shuffle_epi8(x23, sh0), w0));
            a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(_mm256_shuffle_epi8(x01, sh1), w1));
            a23 = _mm256_add_epi32(a23, _mm256_madd_epi16(_mm256_shuffle_epi8(x23, sh1), w1));
        }
        if (k < n) {
            __m256i x01 = load_2x16(p, tw), x23 = load_2x16(p + 2 * tw, tw);
            __m256i w0 = weight_pair(w + k);
            a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(_mm256_shuffle_epi8(x01, sh0), w0));
            a23 = _mm256_add_epi32(a23, _mm256_madd_epi16(_mm256_shuffle_epi8(x23, sh0), w0));
        }
    }
    *r01 = _mm256_srli_epi32(a01, PRESHIFT); /* lane 0: row 0 (r, g, b, 0); lane 1: row 1 */
    *r23 = _mm256_srli_epi32(a23, PRESHIFT);
}

/* The same sums for four rows at once with AVX2: rows share the span and weights of an output
 * column, so their loads go into the two 128-bit lanes of two registers and the per-pixel
 * bookkeeping is paid once for four rows. Output columns are visited in destination order, four
 * at a time: their 4 × 3 bytes of each row are packed into one register lane and written with one
 * 16-byte store whose last 4 bytes the next group overwrites (exact 12-byte writes where a 16-byte
 * one would pass the row's end); single pixels at the end store 4 bytes, the last one 3. */
FL_AVX2_INLINE void hpass_rgb_avx2_x4_np(const uint8_t *t, size_t tw, uint8_t *d, size_t dstride,
                                         uint32_t dw, const span *xs, const int16_t *xw,
                                         int32_t kx2, int flip, const hplan *plan, int np)
{
    const __m256i compact =
        _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4, 5, 6,
                         8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    uint32_t j = 0;
    for (; j + 4 <= dw; j += 4) {
        __m256i r01[4], r23[4];
        for (int i = 0; i < 4; i++) {
            if (np) {
                rgb_px_x4(t + plan[j + i].off, tw, plan[j + i].w, 4, np, &r01[i], &r23[i]);
            } else {
                uint32_t o = flip ? dw - 1 - (j + i) : j + i;
                rgb_px_x4(t + (size_t)xs[o].start * 3, tw, xw + (size_t)o * kx2, xs[o].n, np,
                          &r01[i], &r23[i]);
            }
        }
        /* packs: lane 0 row 0 pixels (i, i+1) as int16 (r, g, b, 0); packus: 4 pixels, 16 bytes */
        __m256i b01 = _mm256_packus_epi16(round_packed(_mm256_packs_epi32(r01[0], r01[1])),
                                          round_packed(_mm256_packs_epi32(r01[2], r01[3])));
        __m256i b23 = _mm256_packus_epi16(round_packed(_mm256_packs_epi32(r23[0], r23[1])),
                                          round_packed(_mm256_packs_epi32(r23[2], r23[3])));
        b01 = _mm256_shuffle_epi8(b01, compact);
        b23 = _mm256_shuffle_epi8(b23, compact);
        __m128i row[4] = {_mm256_castsi256_si128(b01), _mm256_extracti128_si256(b01, 1),
                          _mm256_castsi256_si128(b23), _mm256_extracti128_si256(b23, 1)};
        uint8_t *q = d + (size_t)j * 3;
        if ((size_t)j * 3 + 16 <= (size_t)dw * 3) {
            for (int r = 0; r < 4; r++)
                _mm_storeu_si128((__m128i *)(void *)(q + r * dstride), row[r]);
        } else {
            for (int r = 0; r < 4; r++) {
                _mm_storel_epi64((__m128i *)(void *)(q + r * dstride), row[r]);
                uint32_t v = (uint32_t)_mm_extract_epi32(row[r], 2);
                memcpy(q + r * dstride + 8, &v, 4);
            }
        }
    }
    for (; j < dw; j++) {
        uint32_t o = flip ? dw - 1 - j : j;
        __m256i a01, a23;
        if (np)
            rgb_px_x4(t + plan[j].off, tw, plan[j].w, 4, np, &a01, &a23);
        else
            rgb_px_x4(t + (size_t)xs[o].start * 3, tw, xw + (size_t)o * kx2, xs[o].n, np, &a01,
                      &a23);
        __m256i pk =
            round_packed(_mm256_packs_epi32(a01, a23)); /* lane 0: rows 0, 2; lane 1: 1, 3 */
        pk = _mm256_packus_epi16(pk, pk);
        uint32_t v[4] = {
            (uint32_t)_mm256_extract_epi32(pk, 0), (uint32_t)_mm256_extract_epi32(pk, 4),
            (uint32_t)_mm256_extract_epi32(pk, 1), (uint32_t)_mm256_extract_epi32(pk, 5)};
        uint8_t *q = d + (size_t)j * 3;
        size_t bytes = j + 1 < dw ? 4 : 3;
        for (int r = 0; r < 4; r++)
            memcpy(q + r * dstride, &v[r], bytes);
    }
}

/* np: 1 or 2 tap pairs for every pixel, read from plan (upscales and shrinks up to 2x, the
 * random-resized-crop cases, specialised); 0: per-pixel spans from xs, xw. */
FL_AVX2 static void hpass_rgb_avx2_x4(const uint8_t *t, size_t tw, uint8_t *d, size_t dstride,
                                      uint32_t dw, const span *xs, const int16_t *xw, int32_t kx2,
                                      int flip, const hplan *plan, int np)
{
    if (np == 1)
        hpass_rgb_avx2_x4_np(t, tw, d, dstride, dw, xs, xw, kx2, flip, plan, 1);
    else if (np == 2)
        hpass_rgb_avx2_x4_np(t, tw, d, dstride, dw, xs, xw, kx2, flip, plan, 2);
    else
        hpass_rgb_avx2_x4_np(t, tw, d, dstride, dw, xs, xw, kx2, flip, plan, 0);
}

/* Horizontal pass for one channel, four rows at once with AVX2, four destination pixels at a
 * time from one 16-byte load per row (see gplan): pshufb and pmaddwd give each pixel's sum for
 * a tap pair in one int32 lane, so the four pixels of a row come out in order. A last group that
 * would pass the row's end overlaps the previous one instead (it writes the same bytes again);
 * rows narrower than 4 pixels never get here. Reads at most 15 bytes past a row's last pixel. */
FL_AVX2_INLINE void hpass_gray_avx2_x4_np(const uint8_t *t, size_t tw, uint8_t *d, size_t dstride,
                                          uint32_t dw, const gplan *g, int np)
{
    for (uint32_t j = 0; j < dw; j += 4, g++) {
        if (j + 4 > dw)
            j = dw - 4;
        const uint8_t *p = t + g->base;
        __m256i x01 = load_2x16(p, tw), x23 = load_2x16(p + 2 * tw, tw);
        __m256i c0 =
            _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)g->ctrl[0]));
        __m256i w0 =
            _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)g->w[0]));
        __m256i a01 = _mm256_madd_epi16(_mm256_shuffle_epi8(x01, c0), w0);
        __m256i a23 = _mm256_madd_epi16(_mm256_shuffle_epi8(x23, c0), w0);
        if (np == 2) {
            __m256i c1 = _mm256_broadcastsi128_si256(
                _mm_loadu_si128((const __m128i *)(const void *)g->ctrl[1]));
            __m256i w1 = _mm256_broadcastsi128_si256(
                _mm_loadu_si128((const __m128i *)(const void *)g->w[1]));
            a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(_mm256_shuffle_epi8(x01, c1), w1));
            a23 = _mm256_add_epi32(a23, _mm256_madd_epi16(_mm256_shuffle_epi8(x23, c1), w1));
        }
        __m256i pk = round_packed(
            _mm256_packs_epi32(_mm256_srli_epi32(a01, PRESHIFT), _mm256_srli_epi32(a23, PRESHIFT)));
        pk = _mm256_packus_epi16(pk, pk); /* lane 0: rows 0, 2; lane 1: rows 1, 3 (4 bytes each) */
        uint32_t v[4] = {
            (uint32_t)_mm256_extract_epi32(pk, 0), (uint32_t)_mm256_extract_epi32(pk, 4),
            (uint32_t)_mm256_extract_epi32(pk, 1), (uint32_t)_mm256_extract_epi32(pk, 5)};
        for (int r = 0; r < 4; r++)
            memcpy(d + r * dstride + j, &v[r], 4);
    }
}

FL_AVX2 static void hpass_gray_avx2_x4(const uint8_t *t, size_t tw, uint8_t *d, size_t dstride,
                                       uint32_t dw, const gplan *g, int np)
{
    if (np == 1)
        hpass_gray_avx2_x4_np(t, tw, d, dstride, dw, g, 1);
    else
        hpass_gray_avx2_x4_np(t, tw, d, dstride, dw, g, 2);
}

/* Vertical pass of one row with AVX2, 32 columns at a time: two source rows per pmaddwd. Their
 * bytes are interleaved (punpck with each other, then with zero) into int16 pairs (a_x, b_x) and
 * multiplied by (w_k, w_k+1); an odd last tap pairs with zero. All shuffles stay within 128-bit
 * lanes, so packing the four int32 accumulators back to bytes restores the column order. */
FL_AVX2_INLINE __m256i vcols32(const uint8_t *s, size_t sstride, const int16_t *w, int32_t n)
{
    const __m256i zero = _mm256_setzero_si256();
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int32_t k = 0; k < n; k += 2, s += 2 * sstride) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)s), b = zero, wv;
        if (k + 1 < n) {
            b = _mm256_loadu_si256((const __m256i *)(const void *)(s + sstride));
            wv = weight_pair(w + k);
        } else {
            wv = _mm256_set1_epi32((int32_t)(uint32_t)(uint16_t)w[k]);
        }
        __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), wv));
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), wv));
        a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), wv));
        a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), wv));
    }
    /* a0: columns 0-3 | 16-19, a1: 4-7 | 20-23, a2: 8-11 | 24-27, a3: 12-15 | 28-31 */
    __m256i p01 =
        _mm256_packs_epi32(_mm256_srli_epi32(a0, PRESHIFT), _mm256_srli_epi32(a1, PRESHIFT));
    __m256i p23 =
        _mm256_packs_epi32(_mm256_srli_epi32(a2, PRESHIFT), _mm256_srli_epi32(a3, PRESHIFT));
    return _mm256_packus_epi16(round_packed(p01), round_packed(p23));
}

/* One row of at least 32 columns; the last block overlaps the previous one (it writes the same
 * bytes again). Inlined with n = 2, 3, 4 as constants: the common spans run without branches. */
FL_AVX2_INLINE void vrow32(const uint8_t *s, size_t sstride, const int16_t *w, int32_t n,
                           uint8_t *t, size_t tw)
{
    for (size_t x = 0;; x += 32) {
        if (x + 32 > tw)
            x = tw - 32;
        _mm256_storeu_si256((__m256i *)(void *)(t + x), vcols32(s + x, sstride, w, n));
        if (x + 32 == tw)
            break;
    }
}

/* Output rows [o0, o1) into tmp (row o at tmp + (o - o0) * tw). Windows narrower than 32 bytes
 * take 16 columns at a time and the rest in C. */
FL_AVX2 static void vpass_avx2(const uint8_t *src, size_t sstride, size_t col0, size_t tw,
                               const span *ys, const int16_t *yw, int32_t ky, uint32_t o0,
                               uint32_t o1, uint8_t *tmp)
{
    const __m256i half = _mm256_set1_epi32(1 << (WBITS - 1));
    const __m128i zero = _mm_setzero_si128();
    for (uint32_t o = o0; o < o1; o++) {
        const int16_t *w = yw + (size_t)o * ky;
        const uint8_t *s = src + (size_t)ys[o].start * sstride + col0;
        uint8_t *t = tmp + (size_t)(o - o0) * tw;
        int32_t n = ys[o].n;
        if (n == 1 || (n == 2 && w[1] == 0)) { /* identity row (no vertical scaling) */
            memcpy(t, s, tw);
            continue;
        }
        if (tw >= 32) {
            switch (n) {
            case 2: vrow32(s, sstride, w, 2, t, tw); break;
            case 3: vrow32(s, sstride, w, 3, t, tw); break;
            case 4: vrow32(s, sstride, w, 4, t, tw); break;
            default: vrow32(s, sstride, w, n, t, tw); break;
            }
            continue;
        }
        size_t x = 0;
        for (; x + 16 <= tw; x += 16) {
            __m256i lo = half, hi = half;
            int32_t k = 0;
            for (; k + 1 < n; k += 2) {
                __m128i a =
                    _mm_loadu_si128((const __m128i *)(const void *)(s + (size_t)k * sstride + x));
                __m128i b = _mm_loadu_si128(
                    (const __m128i *)(const void *)(s + (size_t)(k + 1) * sstride + x));
                __m256i wv = weight_pair(w + k);
                lo = _mm256_add_epi32(
                    lo, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b)), wv));
                hi = _mm256_add_epi32(
                    hi, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, b)), wv));
            }
            if (k < n) {
                __m128i a =
                    _mm_loadu_si128((const __m128i *)(const void *)(s + (size_t)k * sstride + x));
                __m256i wv = _mm256_set1_epi32((int32_t)(uint32_t)(uint16_t)w[k]);
                lo = _mm256_add_epi32(
                    lo, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, zero)), wv));
                hi = _mm256_add_epi32(
                    hi, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, zero)), wv));
            }
            __m256i p16 =
                _mm256_packs_epi32(_mm256_srai_epi32(lo, WBITS), _mm256_srai_epi32(hi, WBITS));
            p16 = _mm256_permute4x64_epi64(p16, 0xD8); /* columns back in order */
            __m128i p8 =
                _mm_packus_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1));
            _mm_storeu_si128((__m128i *)(void *)(t + x), p8);
        }
        for (; x < tw; x++) {
            int32_t v = 0;
            for (int32_t k = 0; k < n; k++)
                v += w[k] * s[(size_t)k * sstride + x];
            t[x] = round_px(v);
        }
    }
}
/* axis_weights for four output coordinates at a time, in AVX double lanes: the same IEEE
 * operations in the same order per lane as axis_weight_one (no FMA: the avx2 target does not
 * enable it, so nothing is contracted), hence the same integer weights. Lanes whose span is
 * longer hold v = 0 past a shorter span's end, which leaves its sums unchanged (x + 0.0 == x).
 * Groups with a degenerate span, more than FTAPS taps or a zero sum, and the last out % 4
 * coordinates, go through axis_weight_one. */
FL_AVX2 static void axis_weights_avx2(const axis *a, uint32_t out, span *sp, int16_t *wt,
                                      int32_t wstride)
{
    double inv = 1.0 / a->fscale;
    const __m256d vinv = _mm256_set1_pd(inv), half = _mm256_set1_pd(0.5), one = _mm256_set1_pd(1.0);
    const __m256d sign = _mm256_set1_pd(-0.0), vscale = _mm256_set1_pd(a->scale);
    const __m256d vx0 = _mm256_set1_pd(a->x0), vsup = _mm256_set1_pd(a->support);
    const __m256d vnorm1 = _mm256_set1_pd(1 << WBITS);
    const __m128i lo = _mm_set1_epi32(a->lo), hi = _mm_set1_epi32(a->hi),
                  ks = _mm_set1_epi32(a->ksize);
    const __m128i full = _mm_set1_epi32(1 << WBITS);
    double f[FTAPS][4];
    int32_t r[FTAPS][4];
    uint32_t o = 0;
    for (; o + 4 <= out; o += 4) {
        __m256d center = _mm256_add_pd(
            vx0, _mm256_mul_pd(
                     _mm256_add_pd(_mm256_cvtepi32_pd(_mm_setr_epi32(
                                       (int32_t)o, (int32_t)o + 1, (int32_t)o + 2, (int32_t)o + 3)),
                                   half),
                     vscale));
        __m128i xmin =
            _mm256_cvttpd_epi32(_mm256_floor_pd(_mm256_add_pd(_mm256_sub_pd(center, vsup), half)));
        __m128i xmax =
            _mm256_cvttpd_epi32(_mm256_floor_pd(_mm256_add_pd(_mm256_add_pd(center, vsup), half)));
        xmin = _mm_max_epi32(xmin, lo);
        xmax = _mm_min_epi32(xmax, hi);
        xmax = _mm_min_epi32(xmax, _mm_add_epi32(xmin, ks));
        __m128i n = _mm_sub_epi32(xmax, xmin);
        int32_t nl[4], xl[4];
        _mm_storeu_si128((__m128i *)(void *)nl, n);
        _mm_storeu_si128((__m128i *)(void *)xl, xmin);
        int32_t nmax = nl[0];
        for (int i = 1; i < 4; i++)
            nmax = nl[i] > nmax ? nl[i] : nmax;
        if (_mm_movemask_epi8(_mm_cmpgt_epi32(_mm_set1_epi32(1), n)) || nmax > FTAPS)
            goto scalar; /* a degenerate span, or a very wide one */
        __m256d sum = _mm256_setzero_pd();
        for (int32_t k = 0; k < nmax; k++) {
            __m128i kk = _mm_set1_epi32(k);
            __m256d live = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_cmpgt_epi32(n, kk)));
            __m256d t = _mm256_mul_pd(
                _mm256_add_pd(_mm256_sub_pd(_mm256_cvtepi32_pd(_mm_add_epi32(xmin, kk)), center),
                              half),
                vinv);
            t = _mm256_andnot_pd(sign, t);
            __m256d v = _mm256_and_pd(_mm256_and_pd(_mm256_cmp_pd(t, one, _CMP_LT_OQ), live),
                                      _mm256_sub_pd(one, t));
            sum = _mm256_add_pd(sum, v);
            _mm256_storeu_pd(f[k], v);
        }
        if (_mm256_movemask_pd(_mm256_cmp_pd(sum, _mm256_setzero_pd(), _CMP_GT_OQ)) != 15)
            goto scalar; /* no tap inside the filter somewhere */
        __m256d norm = _mm256_div_pd(vnorm1, sum), c = _mm256_setzero_pd();
        for (int32_t k = 0; k < nmax; k++) {
            c = _mm256_add_pd(c, _mm256_mul_pd(_mm256_loadu_pd(f[k]), norm));
            __m128i rk = _mm256_cvttpd_epi32(_mm256_add_pd(c, half));
            __m128i last = _mm_cmpeq_epi32(n, _mm_set1_epi32(k + 1));
            rk = _mm_min_epi32(_mm_blendv_epi8(rk, full, last), full);
            _mm_storeu_si128((__m128i *)(void *)r[k], rk);
        }
        for (int i = 0; i < 4; i++) {
            int16_t *q = wt + (size_t)(o + i) * wstride;
            int32_t prev = 0, k = 0;
            for (; k < nl[i]; k++) {
                q[k] = (int16_t)(r[k][i] - prev);
                prev = r[k][i];
            }
            for (; k < wstride; k++)
                q[k] = 0;
            sp[o + i].start = xl[i];
            sp[o + i].n = nl[i];
        }
        continue;
    scalar:
        for (uint32_t i = o; i < o + 4; i++)
            axis_weight_one(a, inv, i, sp + i, wt + (size_t)i * wstride, wstride);
    }
    for (; o < out; o++)
        axis_weight_one(a, inv, o, sp + o, wt + (size_t)o * wstride, wstride);
}

/* AVX-512 (F, BW, VL, VBMI, VNNI) kernels. One 64-byte load holds 21 RGB pixels or 64 gray ones,
 * enough for the taps of 16 consecutive destination bytes of any channel count while the shrink
 * factor stays under about 2, so the horizontal pass gathers each output byte's taps with one
 * vpermb per tap pair (see zplan) and keeps the destination's byte order: no per-pixel loads,
 * shuffles or compaction. vpdpwssd is pmaddwd and the add in one instruction; the integer sums
 * are the same as hpass_scalar's (non-negative terms under 2^22, no wrap-around). */
#define FL_HAVE_AVX512_KERNEL 1
#define FL_AVX512_TARGET      "avx2,avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni"
#define FL_AVX512             __attribute__((target(FL_AVX512_TARGET)))
#define FL_AVX512_INLINE      __attribute__((target(FL_AVX512_TARGET), always_inline)) static inline

/* Horizontal pass for rows t + r * tw (r < nrows) into d + r * dstride, nb = dw × channels
 * destination bytes, 16 per zplan group; step = 2 × channels (the byte distance from one tap
 * pair to the next). Reads at most 63 bytes past a group's base: inside the block buffer's
 * padding. The last group's store is masked to the row's end. */
FL_AVX512_INLINE void hpass_z_np(const uint8_t *t, size_t tw, uint32_t nrows, uint8_t *d,
                                 size_t dstride, uint32_t nb, const zplan *z, uint32_t step, int np)
{
    const __m512i half = _mm512_set1_epi32(1 << (WBITS - 1));
    const __mmask64 even = 0x5555555555555555ull; /* low byte of each int16: a pixel; high: 0 */
    const __m512i vstep = _mm512_set1_epi8((char)step);
    for (uint32_t b = 0; b < nb; b += 16, z++) {
        __m512i c0 = _mm512_load_si512((const void *)z->ctrl), c1 = _mm512_add_epi8(c0, vstep);
        __m512i c2 = _mm512_add_epi8(c1, vstep);
        __m512i w0 = _mm512_load_si512((const void *)z->w[0]);
        __m512i w1 = np >= 2 ? _mm512_load_si512((const void *)z->w[1]) : w0;
        __m512i w2 = np >= 3 ? _mm512_load_si512((const void *)z->w[2]) : w0;
        __mmask16 keep = nb - b >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nb - b)) - 1);
        const uint8_t *p = t + z->base;
        for (uint32_t r = 0; r < nrows; r++, p += tw) {
            __m512i x = _mm512_loadu_si512((const void *)p);
            __m512i acc = _mm512_dpwssd_epi32(half, _mm512_maskz_permutexvar_epi8(even, c0, x), w0);
            if (np >= 2)
                acc = _mm512_dpwssd_epi32(acc, _mm512_maskz_permutexvar_epi8(even, c1, x), w1);
            if (np >= 3)
                acc = _mm512_dpwssd_epi32(acc, _mm512_maskz_permutexvar_epi8(even, c2, x), w2);
            __m128i px = _mm512_cvtusepi32_epi8(_mm512_srli_epi32(acc, WBITS));
            if (keep == 0xFFFF) /* a plain store: a masked one to a line not in cache is slow */
                _mm_storeu_si128((__m128i *)(void *)(d + r * dstride + b), px);
            else
                _mm_mask_storeu_epi8(d + r * dstride + b, keep, px);
        }
    }
}

FL_AVX512 static void hpass_z(const uint8_t *t, size_t tw, uint32_t nrows, uint8_t *d,
                              size_t dstride, uint32_t nb, const zplan *z, uint32_t step, int np)
{
    if (np == 1)
        hpass_z_np(t, tw, nrows, d, dstride, nb, z, step, 1);
    else if (np == 2)
        hpass_z_np(t, tw, nrows, d, dstride, nb, z, step, 2);
    else
        hpass_z_np(t, tw, nrows, d, dstride, nb, z, step, 3);
}

/* vcols32 on 64 columns: the same in-lane interleaves, so the same column order after packing. */
FL_AVX512_INLINE __m512i vcols64(const uint8_t *s, size_t sstride, const int16_t *w, int32_t n)
{
    const __m512i zero = _mm512_setzero_si512();
    __m512i a0 = zero, a1 = zero, a2 = zero, a3 = zero;
    for (int32_t k = 0; k < n; k += 2, s += 2 * sstride) {
        __m512i a = _mm512_loadu_si512((const void *)s), b = zero, wv;
        if (k + 1 < n) {
            b = _mm512_loadu_si512((const void *)(s + sstride));
            int32_t wp;
            memcpy(&wp, w + k, 4);
            wv = _mm512_set1_epi32(wp);
        } else {
            wv = _mm512_set1_epi32((int32_t)(uint32_t)(uint16_t)w[k]);
        }
        __m512i lo = _mm512_unpacklo_epi8(a, b), hi = _mm512_unpackhi_epi8(a, b);
        a0 = _mm512_dpwssd_epi32(a0, _mm512_unpacklo_epi8(lo, zero), wv);
        a1 = _mm512_dpwssd_epi32(a1, _mm512_unpackhi_epi8(lo, zero), wv);
        a2 = _mm512_dpwssd_epi32(a2, _mm512_unpacklo_epi8(hi, zero), wv);
        a3 = _mm512_dpwssd_epi32(a3, _mm512_unpackhi_epi8(hi, zero), wv);
    }
    const __m512i r = _mm512_set1_epi16(1 << (15 - (WBITS - PRESHIFT))); /* see round_packed */
    __m512i p01 =
        _mm512_packs_epi32(_mm512_srli_epi32(a0, PRESHIFT), _mm512_srli_epi32(a1, PRESHIFT));
    __m512i p23 =
        _mm512_packs_epi32(_mm512_srli_epi32(a2, PRESHIFT), _mm512_srli_epi32(a3, PRESHIFT));
    return _mm512_packus_epi16(_mm512_mulhrs_epi16(p01, r), _mm512_mulhrs_epi16(p23, r));
}

FL_AVX512_INLINE void vrow64(const uint8_t *s, size_t sstride, const int16_t *w, int32_t n,
                             uint8_t *t, size_t tw)
{
    for (size_t x = 0;; x += 64) {
        if (x + 64 > tw)
            x = tw - 64;
        _mm512_storeu_si512((void *)(t + x), vcols64(s + x, sstride, w, n));
        if (x + 64 == tw)
            break;
    }
}

/* vpass_avx2 with 64 columns at a time; windows narrower than 64 bytes go to vpass_avx2. */
FL_AVX512 static void vpass_z(const uint8_t *src, size_t sstride, size_t col0, size_t tw,
                              const span *ys, const int16_t *yw, int32_t ky, uint32_t o0,
                              uint32_t o1, uint8_t *tmp)
{
    if (tw < 64) {
        vpass_avx2(src, sstride, col0, tw, ys, yw, ky, o0, o1, tmp);
        return;
    }
    for (uint32_t o = o0; o < o1; o++) {
        const int16_t *w = yw + (size_t)o * ky;
        const uint8_t *s = src + (size_t)ys[o].start * sstride + col0;
        uint8_t *t = tmp + (size_t)(o - o0) * tw;
        int32_t n = ys[o].n;
        if (n == 1 || (n == 2 && w[1] == 0)) {
            memcpy(t, s, tw);
            continue;
        }
        switch (n) {
        case 2: vrow64(s, sstride, w, 2, t, tw); break;
        case 3: vrow64(s, sstride, w, 3, t, tw); break;
        case 4: vrow64(s, sstride, w, 4, t, tw); break;
        default: vrow64(s, sstride, w, n, t, tw); break;
        }
    }
}
#endif

/* Highest SIMD kernel level used: 3 AVX-512 (with VBMI and VNNI), 2 AVX2, 1 SSSE3, 0 portable.
 * Lowered only by tests (before any resize runs) to check that every level gives the same bytes. */
static int simd_limit = 3;
void fl_resize_set_simd_limit(int level) { simd_limit = level; }

static int simd_level(void)
{
#ifdef FL_HAVE_SSSE3_KERNEL
    int lvl = __builtin_cpu_supports("avx2") ? 2 : __builtin_cpu_supports("ssse3") ? 1 : 0;
    if (lvl == 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
        __builtin_cpu_supports("avx512vnni"))
        lvl = 3;
    return lvl < simd_limit ? lvl : simd_limit;
#else
    return 0;
#endif
}

/* Output rows [r0, r1) requested for writing. The destination is usually not in any cache (a
 * batch slot of the loader's ring): fetching the next block's lines while this block is computed
 * keeps the kernels' stores from waiting on memory. Prefetches never fault. Always inlined: as a
 * function of its own it has no side effects, and GCC's IPA drops the calls. */
__attribute__((always_inline)) static inline void
prefetch_rows(const uint8_t *dst, size_t dstride, size_t row_bytes, uint32_t r0, uint32_t r1)
{
    if (r0 >= r1)
        return;
    const uint8_t *p = dst + (size_t)r0 * dstride;
    size_t len = (size_t)(r1 - r0 - 1) * dstride + row_bytes;
    for (size_t x = 0; x < len; x += 64)
        __builtin_prefetch(p + x, 1, 3);
    __builtin_prefetch(p + len - 1, 1, 3); /* the last line, where p is not 64-aligned */
}

int fl_resize_window(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride,
                     uint32_t channels, const double win[4], uint8_t *dst, uint32_t dw, uint32_t dh,
                     size_t dstride, int flip, void *scratch, size_t scratch_len, fl_error *err)
{
    if (!src || !dst || sw == 0 || sh == 0 || dw == 0 || dh == 0 || channels == 0 || channels > 4 ||
        sstride < (size_t)sw * channels || dstride < (size_t)dw * channels)
        return fl_error_set(err, FL_E_INVALID,
                            "resize: bad arguments (%ux%u -> %ux%u, %u channels)", sw, sh, dw, dh,
                            channels);
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
        if (scratch)
            return fl_error_set(err, FL_E_INVALID, "resize: scratch of %zu bytes, need %zu",
                                scratch_len, L.total);
        mem = malloc(L.total);
        if (!mem)
            return fl_error_set(err, -ENOMEM, "resize: out of memory");
        scratch = mem;
    }
    uint8_t *base = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    span *xs = (span *)(void *)(base + L.off_xs), *ys = (span *)(void *)(base + L.off_ys);
    int16_t *xw = (int16_t *)(void *)(base + L.off_xw), *yw = (int16_t *)(void *)(base + L.off_yw);
    uint8_t *tmp = base + L.off_tmp;
    int32_t *acc = (int32_t *)(void *)(base + L.off_acc);
    size_t row_bytes = (size_t)dw * channels;
    prefetch_rows(dst, dstride, row_bytes, 0, dh < BLOCK_ROWS ? dh : BLOCK_ROWS);
    int lvl = simd_level();
    (void)lvl; /* only the x86-64 kernels look at it */
#ifdef FL_HAVE_SSSE3_KERNEL
    if (lvl >= 2) {
        axis_weights_avx2(&L.ax, dw, xs, xw, L.kx2);
        axis_weights_avx2(&L.ay, dh, ys, yw, L.ay.ksize);
    } else
#endif
    {
        axis_weights(&L.ax, dw, xs, xw, L.kx2);
        axis_weights(&L.ay, dh, ys, yw, L.ay.ksize);
    }
    int32_t nmax = 0;
    for (uint32_t o = 0; o < dw; o++) {
        xs[o].start -= L.ax.lo; /* relative to the window */
        if (xs[o].n > nmax)
            nmax = xs[o].n;
    }
    memset(tmp + L.tw * (dh < BLOCK_ROWS ? dh : BLOCK_ROWS), 0, 64);

    /* Taps the portable horizontal pass runs for every pixel (kx2 >= 2 and kx2 >= nmax). */
    int32_t nfix = nmax <= 2 ? 2 : nmax <= 4 ? nmax : 0;
    /* The AVX-512 horizontal pass: tap pairs for every byte, and its groups (see zplan); a group
     * whose taps span 64 bytes or more (shrinks past about 2x) turns it off. */
    uint32_t nb = dw * channels;
    int znp = lvl >= 3 && nmax <= 2 * ZPAIRS ? (nmax + 1) / 2 : 0;
    zplan *zp = (zplan *)(void *)(base + L.off_zplan);
    if (znp) {
        uint32_t ng = (nb + 15) / 16;
        for (uint32_t g = 0; g < ng; g++)
            zp[g].base = INT32_MAX, zp[g].last = 0;
        for (uint32_t j = 0; j < dw; j++) { /* lowest first tap, highest last one */
            const span *x = xs + (flip ? dw - 1 - j : j);
            for (uint32_t c = 0; c < channels; c++) {
                zplan *z = zp + (j * channels + c) / 16;
                int32_t first = x->start * (int32_t)channels + (int32_t)c;
                int32_t last = first + (x->n - 1) * (int32_t)channels;
                z->base = first < z->base ? first : z->base;
                z->last = last > z->last ? last : z->last;
            }
        }
        for (uint32_t g = 0; g < ng; g++)
            if (zp[g].last - zp[g].base >= 64)
                znp = 0;
        for (uint32_t b = nb; znp && b < ng * 16; b++) { /* past the row: index 0, weight 0 */
            zplan *z = zp + b / 16;
            memset(z->ctrl + 4 * (b % 16), 0, 4);
            for (int pr = 0; pr < ZPAIRS; pr++)
                z->w[pr][b % 16] = 0;
        }
        for (uint32_t j = 0, b = 0; znp && j < dw; j++) {
            uint32_t o = flip ? dw - 1 - j : j;
            const int16_t *w = xw + (size_t)o * L.kx2;
            int32_t wp[ZPAIRS]; /* kx2 >= 2 * znp: w[2 pr + 1] exists */
            for (int pr = 0; pr < ZPAIRS; pr++)
                wp[pr] =
                    pr < znp
                        ? (int32_t)((uint16_t)w[2 * pr] | (uint32_t)(uint16_t)w[2 * pr + 1] << 16)
                        : 0;
            for (uint32_t c = 0; c < channels; c++, b++) {
                zplan *z = zp + b / 16;
                uint32_t i = b % 16;
                int32_t first = xs[o].start * (int32_t)channels + (int32_t)c - z->base;
                uint8_t *q = z->ctrl + 4 * i;
                q[0] = (uint8_t)first, q[1] = 0;
                q[2] = (uint8_t)(first + (int32_t)channels), q[3] = 0;
                for (int pr = 0; pr < ZPAIRS; pr++)
                    z->w[pr][i] = wp[pr];
            }
        }
    }
    /* Tap pairs the AVX2 kernel runs for every pixel: 1 or 2 from a plan, else per pixel. */
    int pairs = nmax <= 2 ? 1 : nmax <= 4 ? 2 : 0;
    int np = !znp && channels == 3 && lvl >= 2 ? pairs : 0;
    hplan *plan = (hplan *)(void *)(base + L.off_plan);
    for (uint32_t j = 0; np && j < dw; j++) {
        uint32_t o = flip ? dw - 1 - j : j;
        plan[j].off = xs[o].start * 3;
        for (int k = 0; k < 4; k++)
            plan[j].w[k] = k < 2 * np ? xw[(size_t)o * L.kx2 + k] : 0;
    }
    /* The 1-channel AVX2 kernel: groups of 4 destination pixels (the last one moved back to end
     * at the row's end), each within 16 bytes; any group that is not turns it off. */
    int gnp = !znp && channels == 1 && lvl >= 2 && dw >= 4 ? pairs : 0;
    gplan *gp = (gplan *)(void *)(base + L.off_gplan);
    for (uint32_t j = 0, g = 0; gnp && j < dw; j += 4, g++) {
        if (j + 4 > dw)
            j = dw - 4;
        int32_t st[4], lo = INT32_MAX, hi = 0;
        for (int i = 0; i < 4; i++) {
            st[i] = xs[flip ? dw - 1 - (j + i) : j + i].start;
            lo = st[i] < lo ? st[i] : lo;
            hi = st[i] > hi ? st[i] : hi;
        }
        if (hi - lo > 12) { /* taps of these 4 pixels span more than 16 bytes */
            gnp = 0;
            break;
        }
        gp[g].base = lo;
        for (int i = 0; i < 4; i++) {
            const int16_t *w = xw + (size_t)(flip ? dw - 1 - (j + i) : j + i) * L.kx2;
            for (int pr = 0; pr < 2; pr++) {
                uint8_t *c = gp[g].ctrl[pr] + 4 * i;
                c[0] = (uint8_t)(st[i] - lo + 2 * pr), c[1] = 0x80;
                c[2] = (uint8_t)(st[i] - lo + 2 * pr + 1), c[3] = 0x80;
                /* (w_k, w_k+1) as one int32; pair (2, 3) only when the spans reach it */
                uint32_t wp =
                    pr < gnp ? (uint16_t)w[2 * pr] | (uint32_t)(uint16_t)w[2 * pr + 1] << 16 : 0;
                gp[g].w[pr][i] = (int32_t)wp;
            }
        }
    }
    size_t col0 = (size_t)L.ax.lo * channels;
    for (uint32_t o0 = 0; o0 < dh; o0 += BLOCK_ROWS) {
        uint32_t o1 = dh - o0 < BLOCK_ROWS ? dh : o0 + BLOCK_ROWS;
        uint8_t *d = dst + (size_t)o0 * dstride;
        prefetch_rows(dst, dstride, row_bytes, o1, dh - o1 < BLOCK_ROWS ? dh : o1 + BLOCK_ROWS);
#ifdef FL_HAVE_SSSE3_KERNEL
        if (lvl >= 3)
            vpass_z(src, sstride, col0, L.tw, ys, yw, L.ay.ksize, o0, o1, tmp);
        else if (lvl >= 2)
            vpass_avx2(src, sstride, col0, L.tw, ys, yw, L.ay.ksize, o0, o1, tmp);
        else
#endif
            vpass(src, sstride, col0, L.tw, ys, yw, L.ay.ksize, o0, o1, tmp, acc);
#ifdef FL_HAVE_SSSE3_KERNEL
        if (znp) {
            hpass_z(tmp, L.tw, o1 - o0, d, dstride, nb, zp, 2 * channels, znp);
            continue;
        }
        if (channels == 3 && lvl >= 1) {
            uint32_t r = 0;
            if (lvl >= 2 && o1 - o0 == 4)
                hpass_rgb_avx2_x4(tmp, L.tw, d, dstride, dw, xs, xw, L.kx2, flip, plan, np), r = 4;
            for (; r < o1 - o0; r++)
                hpass_rgb_ssse3(tmp + r * L.tw, d + r * dstride, dw, xs, xw, L.kx2, flip);
            continue;
        }
        if (gnp && o1 - o0 == 4) {
            hpass_gray_avx2_x4(tmp, L.tw, d, dstride, dw, gp, gnp);
            continue;
        }
#endif
        for (uint32_t r = 0; r < o1 - o0; r++)
            hpass_scalar(tmp + r * L.tw, d + r * dstride, dw, channels, xs, xw, L.kx2, flip, nfix);
    }
    free(mem);
    return 0;
}

int fl_resize(const uint8_t *src, uint32_t sw, uint32_t sh, size_t sstride, uint32_t channels,
              uint8_t *dst, uint32_t dw, uint32_t dh, size_t dstride, int flip, void *scratch,
              size_t scratch_len, fl_error *err)
{
    double win[4] = {0, 0, sw, sh};
    return fl_resize_window(src, sw, sh, sstride, channels, win, dst, dw, dh, dstride, flip,
                            scratch, scratch_len, err);
}
