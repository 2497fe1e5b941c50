/* test_image_resize.c — fl_resize: identity copies exactly, flip mirrors exactly, constant images
 * stay constant (weights sum to one), agreement with a float reference of the same filter,
 * determinism across runs and threads, identical bytes from every SIMD level (whole images and
 * fractional windows, 1 to 4 channels), scratch handling, argument errors. */
#include <pthread.h>

#include "img_test.h"
#include "image_internal.h"

/* Float reference: the same antialiased triangle filter, computed directly. */
static void ref_axis(double x0, double len, uint32_t size, uint32_t out, uint32_t o, int *lo, int *hi,
                     double *w) {
    double scale = len / out, fs = scale > 1 ? scale : 1, sup = fs;
    double c = x0 + (o + 0.5) * scale;
    int a = (int)floor(c - sup + 0.5), b = (int)floor(c + sup + 0.5);
    if (a < 0) a = 0;
    if (b > (int)size) b = (int)size;
    double s = 0;
    for (int k = a; k < b; k++) {
        double t = fabs((k - c + 0.5) / fs);
        w[k - a] = t < 1 ? 1 - t : 0;
        s += w[k - a];
    }
    for (int k = a; k < b; k++) w[k - a] /= s;
    *lo = a, *hi = b;
}

static void ref_resize(const uint8_t *src, uint32_t sw, uint32_t sh, uint32_t ch, double *dst,
                       uint32_t dw, uint32_t dh) {
    double wx[4096], wy[4096];
    for (uint32_t y = 0; y < dh; y++) {
        int y0, y1;
        ref_axis(0, sh, sh, dh, y, &y0, &y1, wy);
        for (uint32_t x = 0; x < dw; x++) {
            int x0, x1;
            ref_axis(0, sw, sw, dw, x, &x0, &x1, wx);
            for (uint32_t c = 0; c < ch; c++) {
                double v = 0;
                for (int yy = y0; yy < y1; yy++)
                    for (int xx = x0; xx < x1; xx++)
                        v += wy[yy - y0] * wx[xx - x0] * src[((size_t)yy * sw + xx) * ch + c];
                dst[((size_t)y * dw + x) * ch + c] = v;
            }
        }
    }
}

struct job {
    const uint8_t *src;
    uint8_t *dst;
};
static void *thread_resize(void *arg) {
    struct job *j = arg;
    for (int i = 0; i < 20; i++)
        fl_resize(j->src, 301, 199, 301 * 3, 3, j->dst, 97, 61, 97 * 3, i & 1 ? 0 : 0, NULL, 0, NULL);
    return NULL;
}

int main(void) {
    fl_error err;
    /* Identity, with padded strides, 1 and 3 channels, and its mirror. */
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        uint32_t w = 45, h = 17;
        uint8_t *s = synth_image(w, h, ch);
        size_t ds = (size_t)w * ch + 3;
        uint8_t *dst = calloc(ds * h, 1);
        CHECK_RC(fl_resize(s, w, h, (size_t)w * ch, ch, dst, w, h, ds, 0, NULL, 0, &err), 0, &err);
        int ok = 1;
        for (uint32_t y = 0; y < h; y++) ok &= memcmp(dst + y * ds, s + (size_t)y * w * ch, (size_t)w * ch) == 0;
        CHECK(ok);
        CHECK_RC(fl_resize(s, w, h, (size_t)w * ch, ch, dst, w, h, ds, 1, NULL, 0, &err), 0, &err);
        ok = 1;
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < w; x++)
                for (uint32_t c = 0; c < ch; c++)
                    ok &= dst[y * ds + x * ch + c] == s[((size_t)y * w + (w - 1 - x)) * ch + c];
        CHECK(ok);
        free(dst);
        free(s);
    }

    /* Shrink and enlarge: flip is the exact mirror; agrees with the float reference. */
    struct { uint32_t sw, sh, dw, dh, ch; } cases[] = {
        {301, 199, 97, 61, 3}, {64, 64, 224, 224, 3}, {500, 20, 7, 19, 1}, {13, 300, 40, 3, 3},
        {1, 1, 5, 5, 3}, {257, 255, 256, 256, 1}, {100, 100, 1, 1, 3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t sw = cases[i].sw, sh = cases[i].sh, dw = cases[i].dw, dh = cases[i].dh, ch = cases[i].ch;
        uint8_t *s = synth_image(sw, sh, ch);
        size_t n = (size_t)dw * dh * ch;
        uint8_t *a = malloc(n), *b = malloc(n);
        double *r = malloc(n * sizeof(double));
        size_t need = fl_resize_scratch_size(sw, sh, dw, dh, ch);
        CHECK(need > 0);
        void *scratch = malloc(need);
        CHECK_RC(fl_resize(s, sw, sh, (size_t)sw * ch, ch, a, dw, dh, (size_t)dw * ch, 0, scratch, need, &err), 0, &err);
        CHECK_RC(fl_resize(s, sw, sh, (size_t)sw * ch, ch, b, dw, dh, (size_t)dw * ch, 1, NULL, 0, &err), 0, &err);
        int ok = 1;
        for (uint32_t y = 0; y < dh; y++)
            for (uint32_t x = 0; x < dw; x++)
                for (uint32_t c = 0; c < ch; c++)
                    ok &= a[((size_t)y * dw + x) * ch + c] == b[((size_t)y * dw + dw - 1 - x) * ch + c];
        CHECK(ok);
        ref_resize(s, sw, sh, ch, r, dw, dh);
        double maxd = 0;
        for (size_t k = 0; k < n; k++) maxd = fmax(maxd, fabs(a[k] - r[k]));
        if (!(maxd <= 1.0)) fprintf(stderr, "%ux%u -> %ux%u: max diff %.3f from float reference\n", sw, sh, dw, dh, maxd);
        CHECK(maxd <= 1.0);
        CHECK_RC(fl_resize(s, sw, sh, (size_t)sw * ch, ch, a, dw, dh, (size_t)dw * ch, 0, scratch, need - 65, &err),
                 need - 65 < 64 ? 0 : FL_E_INVALID, &err);
        free(scratch);
        free(a);
        free(b);
        free(r);
        free(s);
    }

    /* Constant stays constant at any ratio. */
    {
        uint8_t *s = malloc(77 * 33 * 3);
        memset(s, 201, 77 * 33 * 3);
        uint8_t d[50 * 50 * 3];
        CHECK_RC(fl_resize(s, 77, 33, 77 * 3, 3, d, 50, 50, 150, 1, NULL, 0, &err), 0, &err);
        int ok = 1;
        for (size_t i = 0; i < sizeof d; i++) ok &= d[i] == 201;
        CHECK(ok);
        CHECK_RC(fl_resize(s, 77, 33, 77 * 3, 3, d, 5, 3, 15, 0, NULL, 0, &err), 0, &err);
        ok = 1;
        for (size_t i = 0; i < 45; i++) ok &= d[i] == 201;
        CHECK(ok);
        free(s);
    }

    /* Extreme shrink (thousands of taps per output pixel): still a true weighted average. */
    {
        uint32_t sw = 20000;
        uint8_t *s = malloc((size_t)sw * 2);
        for (uint32_t x = 0; x < sw; x++) s[x] = s[sw + x] = (uint8_t)(x * 255ull / (sw - 1));
        uint8_t d1 = 0, d4[4];
        CHECK_RC(fl_resize(s, sw, 2, sw, 1, &d1, 1, 1, 1, 0, NULL, 0, &err), 0, &err);
        CHECK(d1 >= 126 && d1 <= 129);
        CHECK_RC(fl_resize(s, sw, 2, sw, 1, d4, 4, 1, 4, 0, NULL, 0, &err), 0, &err);
        /* PIL's Image.resize((4, 1), BILINEAR) of the same ramp gives 37 95 159 217. */
        CHECK(abs(d4[0] - 37) <= 1 && abs(d4[1] - 95) <= 1 && abs(d4[2] - 159) <= 1 && abs(d4[3] - 217) <= 1);
        memset(s, 77, (size_t)sw * 2);
        CHECK_RC(fl_resize(s, sw, 2, sw, 1, d4, 4, 1, 4, 1, NULL, 0, &err), 0, &err);
        CHECK(d4[0] == 77 && d4[1] == 77 && d4[2] == 77 && d4[3] == 77);
        free(s);
    }

    /* Deterministic: repeated calls and concurrent threads give identical bytes. */
    {
        uint8_t *s = synth_image(301, 199, 3);
        uint8_t *ref = malloc(97 * 61 * 3);
        CHECK_RC(fl_resize(s, 301, 199, 301 * 3, 3, ref, 97, 61, 97 * 3, 0, NULL, 0, &err), 0, &err);
        pthread_t th[4];
        struct job jobs[4];
        for (int t = 0; t < 4; t++) {
            jobs[t].src = s;
            jobs[t].dst = malloc(97 * 61 * 3);
            pthread_create(&th[t], NULL, thread_resize, &jobs[t]);
        }
        for (int t = 0; t < 4; t++) {
            pthread_join(th[t], NULL);
            CHECK(memcmp(jobs[t].dst, ref, 97 * 61 * 3) == 0);
            free(jobs[t].dst);
        }
        free(ref);
        free(s);
    }

    /* Every SIMD level (AVX2, SSSE3, portable C) gives the same bytes, for odd sizes and flips. */
    {
        struct { uint32_t sw, sh, dw, dh; } sz[] = {{301, 199, 97, 61}, {350, 280, 224, 224}, {64, 50, 224, 224},
                                                   {17, 33, 5, 9}, {1000, 3, 31, 7}, {224, 224, 224, 224}};
        for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
            for (uint32_t ch = 1; ch <= 3; ch += 2)
                for (int flip = 0; flip < 2; flip++) {
                    uint8_t *s = synth_image(sz[i].sw, sz[i].sh, ch);
                    size_t n = (size_t)sz[i].dw * sz[i].dh * ch;
                    uint8_t *out[3];
                    for (int lvl = 0; lvl < 3; lvl++) {
                        out[lvl] = malloc(n);
                        fl_resize_set_simd_limit(lvl);
                        CHECK_RC(fl_resize(s, sz[i].sw, sz[i].sh, (size_t)sz[i].sw * ch, ch, out[lvl], sz[i].dw,
                                           sz[i].dh, (size_t)sz[i].dw * ch, flip, NULL, 0, &err), 0, &err);
                    }
                    fl_resize_set_simd_limit(2);
                    CHECK(memcmp(out[0], out[1], n) == 0 && memcmp(out[0], out[2], n) == 0);
                    for (int lvl = 0; lvl < 3; lvl++) free(out[lvl]);
                    free(s);
                }
    }

    /* The same for windows with fractional corners (the random-resized-crop path), 1 to 4 channels,
     * padded strides: seeded random geometries around the kernels' special cases (up to 2 or 4
     * taps per output pixel, wider spans, thousands of taps, windows under 32 bytes wide, outputs
     * 1 to 6 pixels wide, heights that are not a multiple of 4) and random-resized crops of a
     * 400x350 image to 224x224. Any byte the kernels write past a row shows up in the padding. */
    {
        uint64_t seed = 0x9E3779B97F4A7C15ull;
#define NEXT() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
#define UNIT() ((NEXT() >> 11) * (1.0 / 9007199254740992.0))
        uint8_t *big = synth_image(400, 350, 4);
        for (int i = 0; i < 240; i++) {
            uint32_t sw, sh, dw, dh, ch = 1 + (uint32_t)(NEXT() % 4);
            double win[4];
            if (i < 24) { /* random-resized crop, RGB or gray */
                sw = 400, sh = 350, dw = dh = 224, ch = i % 3 ? 3 : 1;
                double area = sw * sh * (0.08 + 0.92 * UNIT()), ar = 0.75 + UNIT() * (4.0 / 3 - 0.75);
                win[2] = fmin(sqrt(area * ar), sw), win[3] = fmin(sqrt(area / ar), sh);
                win[0] = UNIT() * (sw - win[2]), win[1] = UNIT() * (sh - win[3]);
            } else {
                static const uint32_t big_side[] = {3000, 900, 150};
                sw = i % 37 == 0 ? big_side[i % 3] : 1 + (uint32_t)(NEXT() % 120);
                sh = 1 + (uint32_t)(NEXT() % 90);
                dw = i % 3 == 0 ? 1 + (uint32_t)(NEXT() % 6) : 1 + (uint32_t)(NEXT() % 150);
                dh = 1 + (uint32_t)(NEXT() % 23);
                win[0] = UNIT() * sw * 0.9, win[1] = UNIT() * sh * 0.9;
                win[2] = (sw - win[0]) * (0.02 + 0.98 * UNIT());
                win[3] = (sh - win[1]) * (0.02 + 0.98 * UNIT());
            }
            size_t ss = (size_t)sw * ch + (NEXT() % 4), ds = (size_t)dw * ch + (NEXT() % 4) + 1;
            uint8_t *s = ss * sh <= (size_t)400 * 350 * 4 ? big : synth_image((uint32_t)ss, sh, 1);
            size_t n = ds * dh;
            int flip = (int)(NEXT() & 1);
            uint8_t *out[3];
            for (int lvl = 0; lvl < 3; lvl++) {
                out[lvl] = malloc(n);
                memset(out[lvl], 0xA5, n);
                fl_resize_set_simd_limit(lvl);
                CHECK_RC(fl_resize_window(s, sw, sh, ss, ch, win, out[lvl], dw, dh, ds, flip, NULL, 0, &err),
                         0, &err);
            }
            fl_resize_set_simd_limit(2);
            if (memcmp(out[0], out[1], n) || memcmp(out[0], out[2], n))
                fprintf(stderr, "levels differ: %ux%u window %.3f,%.3f %.3fx%.3f -> %ux%u, %u channels, flip %d\n",
                        sw, sh, win[0], win[1], win[2], win[3], dw, dh, ch, flip);
            CHECK(memcmp(out[0], out[1], n) == 0 && memcmp(out[0], out[2], n) == 0);
            int pad_ok = 1;
            for (uint32_t y = 0; y < dh; y++)
                for (size_t x = (size_t)dw * ch; x < ds; x++) pad_ok &= out[2][y * ds + x] == 0xA5;
            CHECK(pad_ok);
            for (int lvl = 0; lvl < 3; lvl++) free(out[lvl]);
            if (s != big) free(s);
        }
        free(big);
#undef NEXT
#undef UNIT
    }

    uint8_t px[12] = {0};
    CHECK_RC(fl_resize(px, 2, 2, 6, 3, px, 0, 2, 6, 0, NULL, 0, &err), FL_E_INVALID, &err);
    CHECK_RC(fl_resize(px, 2, 2, 5, 3, px, 2, 2, 6, 0, NULL, 0, &err), FL_E_INVALID, &err);
    TEST_DONE();
}
