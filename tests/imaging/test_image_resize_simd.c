/* test_image_resize_simd.c — fl_resize gives the same bytes every time: repeated calls and four
 * concurrent threads agree, and every SIMD level (AVX2, SSSE3, portable C) writes identical bytes
 * for whole images (odd sizes, flips) and for windows with fractional corners (the
 * random-resized-crop path: 1 to 4 channels, padded strides, nothing written past a row). */
#include <pthread.h>

#include "img_test.h"
#include "image_internal.h"

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
                    uint8_t *out[3];
                    for (int lvl = 0; lvl < 3; lvl++) {
                        out[lvl] = malloc(n);
                        fl_resize_set_simd_limit(lvl);
                        EXPECT_RC(fl_resize(s, sz[i].sw, sz[i].sh, (size_t)sz[i].sw * ch, ch,
                                            out[lvl], sz[i].dw, sz[i].dh, (size_t)sz[i].dw * ch,
                                            flip, NULL, 0, &err),
                                  0, &err);
                    }
                    fl_resize_set_simd_limit(2);
                    EXPECT(memcmp(out[0], out[1], n) == 0 && memcmp(out[0], out[2], n) == 0);
                    for (int lvl = 0; lvl < 3; lvl++)
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
            uint8_t *out[3];
            for (int lvl = 0; lvl < 3; lvl++) {
                out[lvl] = malloc(n);
                memset(out[lvl], 0xA5, n);
                fl_resize_set_simd_limit(lvl);
                EXPECT_RC(fl_resize_window(s, sw, sh, ss, ch, win, out[lvl], dw, dh, ds, flip, NULL,
                                           0, &err),
                          0, &err);
            }
            fl_resize_set_simd_limit(2);
            if (memcmp(out[0], out[1], n) || memcmp(out[0], out[2], n))
                fprintf(stderr,
                        "levels differ: %ux%u window %.3f,%.3f %.3fx%.3f -> %ux%u, %u channels, "
                        "flip %d\n",
                        sw, sh, win[0], win[1], win[2], win[3], dw, dh, ch, flip);
            EXPECT(memcmp(out[0], out[1], n) == 0 && memcmp(out[0], out[2], n) == 0);
            int pad_ok = 1;
            for (uint32_t y = 0; y < dh; y++)
                for (size_t x = (size_t)dw * ch; x < ds; x++)
                    pad_ok &= out[2][y * ds + x] == 0xA5;
            EXPECT(pad_ok);
            for (int lvl = 0; lvl < 3; lvl++)
                free(out[lvl]);
            if (s != big)
                free(s);
        }
        free(big);
#undef NEXT
#undef UNIT
    }
    return fl_check_status();
}
