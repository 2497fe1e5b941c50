/* test_image_mutations.c — a deterministic mini-fuzzer run as a regression test: builds small
 * seeds of every kind the decoders handle (JPEG baseline/progressive, 4:2:0/4:2:2/4:4:4, gray,
 * CMYK; PNG RGB/gray/palette/RGBA/16-bit/interlaced; WebP lossy/lossless, with and without
 * alpha, where the build has libwebp), then feeds the fuzz harness
 * (tests/fuzz/fuzz_image.c) each seed and thousands of truncations, bit flips, byte overwrites and
 * splices of it. Passing means no crash and no sanitizer report.
 * With an argument DIR, writes the seeds there instead (how tests/fuzz/corpus/image was made). */
#include <sys/stat.h>

#include "img_test.h"

#ifdef FL_HAVE_WEBP
#include <webp/encode.h>

/* libwebp's output copied into malloc'ed memory (the seeds are free()d). */
static uint8_t *webp_seed(size_t n, uint8_t *out, size_t *len)
{
    uint8_t *c = n ? malloc(n) : NULL;
    if (c)
        memcpy(c, out, n);
    WebPFree(out);
    *len = n;
    return c;
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seed {
    const char *name;
    uint8_t *data;
    size_t len;
} seed;

static uint32_t rng = 2463534242u;
static uint32_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}

int main(int argc, char **argv)
{
    uint32_t w = 40, h = 27;
    uint8_t *rgb = synth_image(w, h, 3), *gray = synth_image(w, h, 1);
    uint8_t *cmyk = malloc((size_t)w * h * 4), *rgba = malloc((size_t)w * h * 4),
            *p16 = malloc((size_t)w * h * 6);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        memcpy(cmyk + 4 * i, rgb + 3 * i, 3);
        cmyk[4 * i + 3] = (uint8_t)(180 + i % 70);
        memcpy(rgba + 4 * i, rgb + 3 * i, 3);
        rgba[4 * i + 3] = (uint8_t)i;
    }
    for (size_t i = 0; i < (size_t)w * h * 3; i++)
        p16[2 * i] = rgb[i], p16[2 * i + 1] = (uint8_t)(i * 7);
    png_color pal[8];
    for (int i = 0; i < 8; i++)
        pal[i].red = (png_byte)(i * 30), pal[i].green = (png_byte)(200 - i * 20),
        pal[i].blue = (png_byte)(i * 9);
    uint8_t trns[8] = {0, 50, 100, 150, 200, 250, 255, 255};
    uint8_t *idx = malloc((size_t)w * h);
    for (size_t i = 0; i < (size_t)w * h; i++)
        idx[i] = (uint8_t)(i % 8);

    seed seeds[16];
    int ns = 0;
    size_t len;
#define ADD(nm, expr)                                                                              \
    do {                                                                                           \
        seeds[ns].data = (expr);                                                                   \
        seeds[ns].len = len;                                                                       \
        seeds[ns].name = nm;                                                                       \
        if (seeds[ns].data)                                                                        \
            ns++;                                                                                  \
    } while (0)
    ADD("baseline420.jpg", write_jpeg(rgb, w, h, 3, JCS_RGB, 85, 2, 2, 0, &len));
    ADD("baseline422.jpg", write_jpeg(rgb, w, h, 3, JCS_RGB, 85, 2, 1, 0, &len));
    ADD("baseline444.jpg", write_jpeg(rgb, w, h, 3, JCS_RGB, 85, 1, 1, 0, &len));
    ADD("progressive420.jpg", write_jpeg(rgb, w, h, 3, JCS_RGB, 85, 2, 2, 1, &len));
    ADD("gray.jpg", write_jpeg(gray, w, h, 1, JCS_GRAYSCALE, 85, 1, 1, 0, &len));
    ADD("cmyk.jpg", write_jpeg(cmyk, w, h, 4, JCS_CMYK, 85, 1, 1, 0, &len));
    ADD("rgb.png", write_png(rgb, w * 3, w, h, 8, PNG_COLOR_TYPE_RGB, NULL, 0, NULL, 0, 0, &len));
    ADD("gray_interlaced.png",
        write_png(gray, w, w, h, 8, PNG_COLOR_TYPE_GRAY, NULL, 0, NULL, 0, 1, &len));
    ADD("palette_trns.png",
        write_png(idx, w, w, h, 8, PNG_COLOR_TYPE_PALETTE, pal, 8, trns, 8, 0, &len));
    ADD("rgba.png",
        write_png(rgba, w * 4, w, h, 8, PNG_COLOR_TYPE_RGBA, NULL, 0, NULL, 0, 0, &len));
    ADD("rgb16.png",
        write_png(p16, w * 6, w, h, 16, PNG_COLOR_TYPE_RGB, NULL, 0, NULL, 0, 0, &len));
    /* Restart markers every 2 MCUs, tall enough that the harness's crop decodes only some of them.
     */
    {
        uint32_t th = 130;
        uint8_t *tall = synth_image(w, th, 3),
                *t = write_jpeg(tall, w, th, 3, JCS_RGB, 85, 2, 2, 0, &len);
        fl_encoder *e = NULL;
        const uint8_t *o;
        size_t olen;
        fl_error err;
        uint8_t *r = NULL;
        if (t && fl_encoder_create(&e, &err) == 0 &&
            fl_jpeg_add_restarts(e, t, len, 2, &o, &olen, &err) == 0) {
            r = malloc(olen);
            memcpy(r, o, olen);
            len = olen;
        }
        ADD("restart420.jpg", r);
        fl_encoder_free(e);
        free(t);
        free(tall);
    }
#ifdef FL_HAVE_WEBP
    {
        uint8_t *o;
        size_t n;
        n = WebPEncodeRGB(rgb, (int)w, (int)h, (int)w * 3, 80.f, &o);
        ADD("lossy.webp", webp_seed(n, o, &len));
        n = WebPEncodeLosslessRGB(rgb, (int)w, (int)h, (int)w * 3, &o);
        ADD("lossless.webp", webp_seed(n, o, &len));
        n = WebPEncodeRGBA(rgba, (int)w, (int)h, (int)w * 4, 80.f, &o); /* VP8X + ALPH + VP8 */
        ADD("lossy_alpha.webp", webp_seed(n, o, &len));
        n = WebPEncodeLosslessRGBA(rgba, (int)w, (int)h, (int)w * 4, &o);
        ADD("lossless_alpha.webp", webp_seed(n, o, &len));
    }
    EXPECT(ns == 16);
#else
    EXPECT(ns == 12);
#endif

    if (argc > 1) {
        mkdir(argv[1], 0777);
        for (int i = 0; i < ns; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[1], seeds[i].name);
            FILE *f = fopen(path, "wb");
            EXPECT(f != NULL);
            if (f) {
                fwrite(seeds[i].data, 1, seeds[i].len, f);
                fclose(f);
            }
        }
    }

    long runs = 0;
    for (int i = 0; i < ns && argc <= 1; i++) {
        const uint8_t *s = seeds[i].data;
        size_t n = seeds[i].len;
        uint8_t *m = malloc(n + 64);
        LLVMFuzzerTestOneInput(s, n);
        /* Every truncation length near the start and end, a stride through the middle. */
        for (size_t cut = 1; cut < n; cut += (cut < 200 || cut > n - 50) ? 1 : 17, runs++)
            LLVMFuzzerTestOneInput(s, cut);
        for (int t = 0; t < 2500; t++, runs++) {
            memcpy(m, s, n);
            size_t mlen = n;
            int kind = (int)(next() % 4), count = 1 + (int)(next() % 4);
            for (int c = 0; c < count; c++) {
                size_t pos = next() % mlen;
                if (kind == 0)
                    m[pos] ^= (uint8_t)(1u << (next() % 8)); /* bit flip */
                else if (kind == 1)
                    m[pos] = (uint8_t)next(); /* byte */
                else if (kind == 2)
                    m[pos] = (uint8_t[]){0x00, 0xFF, 0x7F, 0x80}[next() % 4];
                else { /* splice */
                    size_t from = next() % n, k = 1 + next() % 16;
                    if (pos + k > mlen)
                        k = mlen - pos;
                    if (from + k > n)
                        k = n - from;
                    memmove(m + pos, s + from, k);
                }
            }
            /* Keep the header mostly intact half the time so the decoders get deep. */
            if (t & 1)
                memcpy(m, s, n < 24 ? n : 24);
            LLVMFuzzerTestOneInput(m, mlen);
        }
        free(m);
    }
    if (argc <= 1)
        printf("%d seeds, %ld mutated inputs, no crash\n", ns, runs);
    for (int i = 0; i < ns; i++)
        free(seeds[i].data);
    free(rgb), free(gray), free(cmyk), free(rgba), free(p16), free(idx);
    return fl_check_status();
}
