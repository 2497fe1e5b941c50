/* test_image_resize_simd.c — fl_resize gives the same bytes every time: repeated calls and four
 * concurrent threads agree, and every SIMD level (AVX-512, AVX2, SSSE3, portable C) writes
 * identical bytes for whole images (odd sizes, flips) and for windows with fractional corners (the
 * random-resized-crop path: 1 to 4 channels, padded strides, nothing written past a row), and on
 * noise images over thousands of seeded geometries (up- and downscales from 1/40 to 40x, 1-pixel
 * windows and outputs, windows flush with the right and bottom edges), whose bytes also hash to
 * the value the resampler gave before the AVX-512 kernels existed. */
#include <pthread.h>

#include "img_test.h"
#include "image_internal.h"

#define GEOMS      1500
#define GEOMS_HASH 0xB21608C115F22BB4ull /* FNV-1a 64 of the 1500 outputs of the last section */
#define NLEVELS    4 /* fl_resize_set_simd_limit: 0 portable C ... 3 AVX-512; capped by the CPU */

struct job {
    const uint8_t *src;
    uint8_t *dst;
};
static void *thread_resize(void *arg)
{
    struct job *j = arg;
    for (int i = 0; i < 20; i++)
        fl_resize(j->src, 301, 199, 301 * 3, 3, j->dst, 97, 61, 97 * 3, i & 1 ? 0 : 0, NULL, 0,
                  NULL);
    return NULL;
}

/* The window resized at every SIMD level into out[level] (each malloc'ed, prefilled with `fill`
 * so bytes written past a row show), then the best level set back. */
static void window_levels(const uint8_t *s, uint32_t sw, uint32_t sh, size_t ss, uint32_t ch,
                          const double win[4], uint32_t dw, uint32_t dh, size_t ds, int flip,
                          uint8_t fill, uint8_t *out[NLEVELS])
{
    fl_error err;
    size_t n = ds * dh;
    for (int lvl = 0; lvl < NLEVELS; lvl++) {
        out[lvl] = malloc(n);
        memset(out[lvl], fill, n);
        fl_resize_set_simd_limit(lvl);
        EXPECT_RC(
            fl_resize_window(s, sw, sh, ss, ch, win, out[lvl], dw, dh, ds, flip, NULL, 0, &err), 0,
            &err);
    }
    fl_resize_set_simd_limit(NLEVELS - 1);
}

int main(void)
{
    fl_error err;
    /* Deterministic: repeated calls and concurrent threads give identical bytes. */
    {
        uint8_t *s = synth_image(301, 199, 3);
        uint8_t *ref = malloc(97 * 61 * 3);
        EXPECT_RC(fl_resize(s, 301, 199, 301 * 3, 3, ref, 97, 61, 97 * 3, 0, NULL, 0, &err), 0,
                  &err);
        pthread_t th[4];
        struct job jobs[4];
        for (int t = 0; t < 4; t++) {
            jobs[t].src = s;
            jobs[t].dst = malloc(97 * 61 * 3);
            pthread_create(&th[t], NULL, thread_resize, &jobs[t]);
        }
        for (int t = 0; t < 4; t++) {
            pthread_join(th[t], NULL);
            EXPECT(memcmp(jobs[t].dst, ref, 97 * 61 * 3) == 0);
            free(jobs[t].dst);
        }
        free(ref);
        free(s);
    }

    /* Every SIMD level (AVX2, SSSE3, portable C) gives the same bytes, for odd sizes and flips. */
    {
        struct {
            uint32_t sw, sh, dw, dh;
        } sz[] = {{301, 199, 97, 61}, {350, 280, 224, 224}, {64, 50, 224, 224},
                  {17, 33, 5, 9},     {1000, 3, 31, 7},     {224, 224, 224, 224}};
        for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
            for (uint32_t ch = 1; ch <= 3; ch += 2)
                for (int flip = 0; flip < 2; flip++) {
                    uint8_t *s = synth_image(sz[i].sw, sz[i].sh, ch);
                    size_t n = (size_t)sz[i].dw * sz[i].dh * ch;
                    uint8_t *out[NLEVELS];
                    for (int lvl = 0; lvl < NLEVELS; lvl++) {
                        out[lvl] = malloc(n);
                        fl_resize_set_simd_limit(lvl);
                        EXPECT_RC(fl_resize(s, sz[i].sw, sz[i].sh, (size_t)sz[i].sw * ch, ch,
                                            out[lvl], sz[i].dw, sz[i].dh, (size_t)sz[i].dw * ch,
                                            flip, NULL, 0, &err),
                                  0, &err);
                    }
                    fl_resize_set_simd_limit(NLEVELS - 1);
                    for (int lvl = 1; lvl < NLEVELS; lvl++)
                        EXPECT(memcmp(out[0], out[lvl], n) == 0);
                    for (int lvl = 0; lvl < NLEVELS; lvl++)
                        free(out[lvl]);
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
                double area = sw * sh * (0.08 + 0.92 * UNIT()),
                       ar = 0.75 + UNIT() * (4.0 / 3 - 0.75);
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
            uint8_t *out[NLEVELS];
            window_levels(s, sw, sh, ss, ch, win, dw, dh, ds, flip, 0xA5, out);
            int same = 1;
            for (int lvl = 1; lvl < NLEVELS; lvl++)
                same &= memcmp(out[0], out[lvl], n) == 0;
            if (!same)
                fprintf(stderr,
                        "levels differ: %ux%u window %.3f,%.3f %.3fx%.3f -> %ux%u, %u channels, "
                        "flip %d\n",
                        sw, sh, win[0], win[1], win[2], win[3], dw, dh, ch, flip);
            EXPECT(same);
            int pad_ok = 1;
            for (int lvl = 0; lvl < NLEVELS; lvl++)
                for (uint32_t y = 0; y < dh; y++)
                    for (size_t x = (size_t)dw * ch; x < ds; x++)
                        pad_ok &= out[lvl][y * ds + x] == 0xA5;
            EXPECT(pad_ok);
            for (int lvl = 0; lvl < NLEVELS; lvl++)
                free(out[lvl]);
            if (s != big)
                free(s);
        }
        free(big);
#undef NEXT
#undef UNIT
    }

    /* Noise images (a wrong tap changes the bytes) through seeded geometries at every level,
     * against the portable C (level 0), and an FNV-1a hash of all outputs against the hash the
     * resampler gave before the AVX-512 kernels were added. */
    {
        uint64_t seed = 0xD1B54A32D192ED03ull;
#define NEXT() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
#define UNIT() ((NEXT() >> 11) * (1.0 / 9007199254740992.0))
        uint64_t hash = 0xCBF29CE484222325ull;
        int bad = 0;
        for (int i = 0; i < GEOMS; i++) {
            uint32_t ch = 1 + (uint32_t)(NEXT() % 4), sw = 1, sh = 1, dw = 1,
                     dh = 1; /* both axes set below */
            double win[4];
            for (int ax = 0; ax < 2; ax++) {
                uint32_t size, out;
                double x0, len;
                int mode = (int)(NEXT() % 8);
                if (mode == 0) { /* whole axis */
                    size = 1 + (uint32_t)(NEXT() % 300);
                    x0 = 0, len = size;
                    out = 1 + (uint32_t)(NEXT() % 300);
                } else {
                    /* ratio len / out: 1/40 .. 40, often near 1 and 2 (the kernels' limits) */
                    double ratio = mode == 1   ? 1.0 + 0.2 * UNIT()
                                   : mode == 2 ? 1.8 + 0.5 * UNIT()
                                   : mode == 3 ? 0.3 + 0.7 * UNIT()
                                               : exp(log(1.0 / 40) + UNIT() * log(1600.0));
                    uint32_t most = NEXT() % 4 ? 250 : 8;
                    out = 1 + (uint32_t)(NEXT() % most);
                    len = out * ratio;
                    if (len > 3000)
                        len = 3000 * UNIT() + 0.01;
                    if (NEXT() % 3 == 0)
                        len = ceil(len);
                    size = (uint32_t)ceil(len) + (uint32_t)(NEXT() % 40);
                    int where = (int)(NEXT() % 3); /* left edge, inside, right edge */
                    x0 = where == 0 ? 0 : where == 1 ? UNIT() * (size - len) : size - len;
                }
                if (ax == 0)
                    sw = size, win[0] = x0, win[2] = len, dw = out;
                else
                    sh = size, win[1] = x0, win[3] = len, dh = out;
            }
            if ((uint64_t)sw * sh * ch > 600000 || (uint64_t)dw * dh * ch > 100000) {
                i--; /* keep the test short: draw again */
                continue;
            }
            size_t ss = (size_t)sw * ch + (NEXT() % 5), ds = (size_t)dw * ch + (NEXT() % 5);
            uint8_t *s = malloc(ss * sh);
            for (size_t k = 0; k < ss * sh; k++) /* noise, with runs of 0 and 255 */
                s[k] = (uint8_t)(k % 97 < 5 ? 255 : k % 89 < 5 ? 0 : NEXT() >> 56);
            int flip = (int)(NEXT() & 1);
            size_t n = ds * dh;
            uint8_t *out[NLEVELS];
            window_levels(s, sw, sh, ss, ch, win, dw, dh, ds, flip, 0x5A, out);
            for (int lvl = 1; lvl < NLEVELS; lvl++)
                if (memcmp(out[0], out[lvl], n) && bad++ < 10)
                    fprintf(stderr,
                            "level %d differs from C: %ux%u window %.4f,%.4f %.4fx%.4f -> %ux%u, "
                            "%u channels, flip %d\n",
                            lvl, sw, sh, win[0], win[1], win[2], win[3], dw, dh, ch, flip);
            for (uint32_t y = 0; y < dh; y++)
                for (size_t x = 0; x < ds; x++) {
                    hash ^= out[0][y * ds + x];
                    hash *= 0x100000001B3ull;
                }
            for (int lvl = 0; lvl < NLEVELS; lvl++)
                free(out[lvl]);
            free(s);
        }
        EXPECT(bad == 0);
        if (hash != GEOMS_HASH)
            fprintf(stderr, "outputs hash to %016llx, expected %016llx\n", (unsigned long long)hash,
                    (unsigned long long)GEOMS_HASH);
        EXPECT(hash == GEOMS_HASH);
#undef NEXT
#undef UNIT
    }
    return fl_check_status();
}
