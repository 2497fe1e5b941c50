/* test_image_resize.c — fl_resize: identity copies exactly, flip mirrors exactly, constant images
 * stay constant (weights sum to one), agreement with a float reference of the same filter, extreme
 * shrinks, scratch handling, argument errors. Determinism and the SIMD levels:
 * test_image_resize_simd. */
#include "img_test.h"
#include "image_internal.h"

/* Float reference: the same antialiased triangle filter, computed directly. */
static void ref_axis(double x0, double len, uint32_t size, uint32_t out, uint32_t o, int *lo,
                     int *hi, double *w)
{
    double scale = len / out, fs = scale > 1 ? scale : 1, sup = fs;
    double c = x0 + (o + 0.5) * scale;
    int a = (int)floor(c - sup + 0.5), b = (int)floor(c + sup + 0.5);
    if (a < 0)
        a = 0;
    if (b > (int)size)
        b = (int)size;
    double s = 0;
    for (int k = a; k < b; k++) {
        double t = fabs((k - c + 0.5) / fs);
        w[k - a] = t < 1 ? 1 - t : 0;
        s += w[k - a];
    }
    for (int k = a; k < b; k++)
        w[k - a] /= s;
    *lo = a, *hi = b;
}

static void ref_resize(const uint8_t *src, uint32_t sw, uint32_t sh, uint32_t ch, double *dst,
                       uint32_t dw, uint32_t dh)
{
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

int main(void)
{
    fl_error err;
    /* Identity, with padded strides, 1 and 3 channels, and its mirror. */
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        uint32_t w = 45, h = 17;
        uint8_t *s = synth_image(w, h, ch);
        size_t ds = (size_t)w * ch + 3;
        uint8_t *dst = calloc(ds * h, 1);
        EXPECT_RC(fl_resize(s, w, h, (size_t)w * ch, ch, dst, w, h, ds, 0, NULL, 0, &err), 0, &err);
        int ok = 1;
        for (uint32_t y = 0; y < h; y++)
            ok &= memcmp(dst + y * ds, s + (size_t)y * w * ch, (size_t)w * ch) == 0;
        EXPECT(ok);
        EXPECT_RC(fl_resize(s, w, h, (size_t)w * ch, ch, dst, w, h, ds, 1, NULL, 0, &err), 0, &err);
        ok = 1;
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < w; x++)
                for (uint32_t c = 0; c < ch; c++)
                    ok &= dst[y * ds + x * ch + c] == s[((size_t)y * w + (w - 1 - x)) * ch + c];
        EXPECT(ok);
        free(dst);
        free(s);
    }

    /* Shrink and enlarge: flip is the exact mirror; agrees with the float reference. */
    struct {
        uint32_t sw, sh, dw, dh, ch;
    } cases[] = {{301, 199, 97, 61, 3}, {64, 64, 224, 224, 3}, {500, 20, 7, 19, 1},
                 {13, 300, 40, 3, 3},   {1, 1, 5, 5, 3},       {257, 255, 256, 256, 1},
                 {100, 100, 1, 1, 3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t sw = cases[i].sw, sh = cases[i].sh, dw = cases[i].dw, dh = cases[i].dh,
                 ch = cases[i].ch;
        uint8_t *s = synth_image(sw, sh, ch);
        size_t n = (size_t)dw * dh * ch;
        uint8_t *a = malloc(n), *b = malloc(n);
        double *r = malloc(n * sizeof(double));
        size_t need = fl_resize_scratch_size(sw, sh, dw, dh, ch);
        EXPECT(need > 0);
        void *scratch = malloc(need);
        EXPECT_RC(fl_resize(s, sw, sh, (size_t)sw * ch, ch, a, dw, dh, (size_t)dw * ch, 0, scratch,
                            need, &err),
                  0, &err);
        EXPECT_RC(
            fl_resize(s, sw, sh, (size_t)sw * ch, ch, b, dw, dh, (size_t)dw * ch, 1, NULL, 0, &err),
            0, &err);
        int ok = 1;
        for (uint32_t y = 0; y < dh; y++)
            for (uint32_t x = 0; x < dw; x++)
                for (uint32_t c = 0; c < ch; c++)
                    ok &= a[((size_t)y * dw + x) * ch + c] ==
                          b[((size_t)y * dw + dw - 1 - x) * ch + c];
        EXPECT(ok);
        ref_resize(s, sw, sh, ch, r, dw, dh);
        double maxd = 0;
        for (size_t k = 0; k < n; k++)
            maxd = fmax(maxd, fabs(a[k] - r[k]));
        if (!(maxd <= 1.0))
            fprintf(stderr, "%ux%u -> %ux%u: max diff %.3f from float reference\n", sw, sh, dw, dh,
                    maxd);
        EXPECT(maxd <= 1.0);
        EXPECT_RC(fl_resize(s, sw, sh, (size_t)sw * ch, ch, a, dw, dh, (size_t)dw * ch, 0, scratch,
                            need - 65, &err),
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
        EXPECT_RC(fl_resize(s, 77, 33, 77 * 3, 3, d, 50, 50, 150, 1, NULL, 0, &err), 0, &err);
        int ok = 1;
        for (size_t i = 0; i < sizeof d; i++)
            ok &= d[i] == 201;
        EXPECT(ok);
        EXPECT_RC(fl_resize(s, 77, 33, 77 * 3, 3, d, 5, 3, 15, 0, NULL, 0, &err), 0, &err);
        ok = 1;
        for (size_t i = 0; i < 45; i++)
            ok &= d[i] == 201;
        EXPECT(ok);
        free(s);
    }

    /* Extreme shrink (thousands of taps per output pixel): still a true weighted average. */
    {
        uint32_t sw = 20000;
        uint8_t *s = malloc((size_t)sw * 2);
        for (uint32_t x = 0; x < sw; x++)
            s[x] = s[sw + x] = (uint8_t)(x * 255ull / (sw - 1));
        uint8_t d1 = 0, d4[4];
        EXPECT_RC(fl_resize(s, sw, 2, sw, 1, &d1, 1, 1, 1, 0, NULL, 0, &err), 0, &err);
        EXPECT(d1 >= 126 && d1 <= 129);
        EXPECT_RC(fl_resize(s, sw, 2, sw, 1, d4, 4, 1, 4, 0, NULL, 0, &err), 0, &err);
        /* PIL's Image.resize((4, 1), BILINEAR) of the same ramp gives 37 95 159 217. */
        EXPECT(abs(d4[0] - 37) <= 1 && abs(d4[1] - 95) <= 1 && abs(d4[2] - 159) <= 1 &&
               abs(d4[3] - 217) <= 1);
        memset(s, 77, (size_t)sw * 2);
        EXPECT_RC(fl_resize(s, sw, 2, sw, 1, d4, 4, 1, 4, 1, NULL, 0, &err), 0, &err);
        EXPECT(d4[0] == 77 && d4[1] == 77 && d4[2] == 77 && d4[3] == 77);
        free(s);
    }

    uint8_t px[12] = {0};
    EXPECT_RC(fl_resize(px, 2, 2, 6, 3, px, 0, 2, 6, 0, NULL, 0, &err), FL_E_INVALID, &err);
    EXPECT_RC(fl_resize(px, 2, 2, 5, 3, px, 2, 2, 6, 0, NULL, 0, &err), FL_E_INVALID, &err);
    return fl_check_status();
}
