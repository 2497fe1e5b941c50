/* test_image_crop_exact.c — fl_decode_crop_resize must write every output byte from decoded
 * pixels and, wherever it decodes at the same DCT scale as the reference, equal "decode at that
 * scale, cut the window, resample it" byte for byte. Regression for the loader's 56×61 JPEG
 * cropped to 23×24+7+6 → 28×20, whose right edge column came from libjpeg's cropped-window
 * upsampler (edge chroma replicated) instead of the full decode's. Each decode runs twice, into
 * dst pre-filled with 0xAA and with 0x55 (and scratch scribbled in between): bytes left unwritten
 * or computed from stale scratch show up as differences without valgrind or MSan. Files rewritten
 * with restart markers (fl_jpeg_add_restarts: per MCU row, and every 1, 2, 3 MCUs) decode to the
 * same pixels, and their crops, which decode only the restart intervals the crop touches, are
 * byte-identical too. */
#include "img_test.h"

#include "image_internal.h"

static fl_decoder *d, *dref;
static int quick; /* --quick (the valgrind run): fewer random crops */
static fl_error err;

/* Decode the crop twice with different dst fills; require equal results. Returns 0 on success. */
static int crop_twice(const uint8_t *f, size_t len, fl_rect r, uint32_t ow, uint32_t oh,
                      uint32_t ch, int flip, uint8_t *got)
{
    size_t n = (size_t)ow * oh * ch;
    uint8_t *again = malloc(n);
    memset(got, 0xAA, n);
    int rc = fl_decode_crop_resize(d, f, len, &r, ow, oh, ch, flip, got, &err);
    EXPECT_RC(rc, 0, &err);
    /* Scribble over the decoder's scratch so stale pixels cannot repeat by luck. */
    memset(d->image.p, 0x5A, d->image.cap);
    memset(d->resize.p, 0xA5, d->resize.cap);
    memset(again, 0x55, n);
    EXPECT_RC(fl_decode_crop_resize(d, f, len, &r, ow, oh, ch, flip, again, &err), 0, &err);
    int same = memcmp(got, again, n) == 0;
    if (!same)
        fprintf(stderr, "crop %ux%u+%u+%u -> %ux%u ch %u: output depends on the dst fill\n",
                r.width, r.height, r.x, r.y, ow, oh, ch);
    EXPECT(same);
    free(again);
    return rc || !same;
}

/* The DCT scale (n/8) fl_decode_crop_resize picks: smallest power of two covering the output. */
static uint32_t crop_scale(fl_rect r, uint32_t ow, uint32_t oh)
{
    for (uint32_t n = 1; n < 8; n *= 2)
        if ((uint64_t)r.width * n >= (uint64_t)ow * 8 && (uint64_t)r.height * n >= (uint64_t)oh * 8)
            return n;
    return 8;
}

/* Reference: decode the whole image at the same DCT scale, then resample the crop's window
 * (fractional at reduced scales) exactly as the crop path maps it. */
static int check_exact(const uint8_t *f, size_t len, uint32_t W, uint32_t H, fl_rect r, uint32_t ow,
                       uint32_t oh, uint32_t ch, int flip, const char *what)
{
    size_t n = (size_t)ow * oh * ch;
    uint8_t *got = malloc(n), *want = malloc(n);
    int bad = crop_twice(f, len, r, ow, oh, ch, flip, got);
    uint32_t num = crop_scale(r, ow, oh);
    fl_image full;
    /* fl_decode picks the smallest scale whose output covers min size: ask for exactly n/8. */
    uint32_t mw = (uint32_t)(((uint64_t)W * num + 7) / 8),
             mh = (uint32_t)(((uint64_t)H * num + 7) / 8);
    EXPECT_RC(fl_decode(dref, f, len, ch, mw, mh, &full, &err), 0, &err);
    EXPECT(full.width == mw && full.height == mh);
    double s = num / 8.0;
    double win[4] = {r.x * s, r.y * s, 0, 0};
    win[2] = fmin((r.x + r.width) * s, full.width) - win[0];
    win[3] = fmin((r.y + r.height) * s, full.height) - win[1];
    EXPECT_RC(fl_resize_window(full.pixels, full.width, full.height, full.stride, ch, win, want, ow,
                               oh, (size_t)ow * ch, flip, NULL, 0, &err),
              0, &err);
    if (num == 8) { /* full scale: also the public reference, crop then fl_resize */
        uint8_t *want2 = malloc(n);
        const uint8_t *sub = full.pixels + (size_t)r.y * full.stride + (size_t)r.x * ch;
        EXPECT_RC(fl_resize(sub, r.width, r.height, full.stride, ch, want2, ow, oh, (size_t)ow * ch,
                            flip, NULL, 0, &err),
                  0, &err);
        EXPECT(memcmp(want, want2, n) == 0);
        free(want2);
    }
    if (memcmp(got, want, n) != 0) {
        size_t i = 0;
        while (got[i] == want[i])
            i++;
        fprintf(stderr,
                "%s: crop %ux%u+%u+%u -> %ux%u ch %u flip %d (scale %u/8) differs from "
                "the reference at byte %zu (%u vs %u), max diff %d\n",
                what, r.width, r.height, r.x, r.y, ow, oh, ch, flip, num, i, got[i], want[i],
                max_abs_diff(got, want, n));
        bad = 1;
        fl_check_failures++;
    }
    free(got);
    free(want);
    return bad;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{ /* xorshift64*, deterministic */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)(((rng * 0x2545F4914F6CDD1Dull) >> 33) % n);
}

/* fl_jpeg_add_restarts: the rewrite decodes to the same pixels, and crops of it (which decode
 * only the restart intervals they touch) equal both the reference and the crop decode that reads
 * the whole stream. */
static fl_encoder *rst_enc;
static void restart_suite1(const uint8_t *f, size_t len, uint32_t W, uint32_t H, uint32_t ch,
                           uint32_t max_mcus, int count, const char *what)
{
    const uint8_t *o;
    size_t olen;
    EXPECT_RC(fl_jpeg_add_restarts(rst_enc, f, len, max_mcus, &o, &olen, &err), 0, &err);
    uint8_t *r = malloc(olen);
    memcpy(r, o, olen);
    /* A DRI segment is there, and the pixels are unchanged. */
    int has_dri = 0;
    for (size_t i = 0; i + 1 < olen && !has_dri; i++)
        has_dri = r[i] == 0xFF && r[i + 1] == 0xDD;
    EXPECT(has_dri);
    fl_image a, b;
    EXPECT_RC(fl_decode(d, f, len, ch, 0, 0, &a, &err), 0, &err);
    uint8_t *pa = malloc((size_t)a.height * a.stride);
    memcpy(pa, a.pixels, (size_t)a.height * a.stride);
    EXPECT_RC(fl_decode(dref, r, olen, ch, 0, 0, &b, &err), 0, &err);
    EXPECT(a.width == W && b.width == W && a.height == H && b.height == H &&
           memcmp(pa, b.pixels, (size_t)a.height * a.stride) == 0);
    free(pa);
    fl_decoder *noskip;
    EXPECT_RC(fl_decoder_create(0, &noskip, &err), 0, &err);
    fl_decoder_set_flags(noskip, FL_DECODE_NO_RESTART_SKIP);
    size_t skipped = 0;
    if (quick)
        count /= 4;
    for (int i = 0; i < count; i++) {
        fl_rect c;
        c.height = 1 + rnd(H / 2);
        c.width = 1 + rnd(i & 4 ? W : W / 2);
        c.x = rnd(W - c.width + 1);
        c.y = H / 4 + rnd(H - H / 4 - c.height + 1); /* mostly far enough down to skip rows */
        uint32_t ow = 1 + rnd(i & 1 ? 48 : c.width + 4), oh = 1 + rnd(i & 1 ? 48 : c.height + 4);
        int flip = i & 2 ? 1 : 0;
        size_t n = (size_t)ow * oh * ch;
        uint8_t *x = malloc(n), *y = malloc(n);
        d->stream.cap = 0; /* detect whether the skip path ran (scratch regrows) */
        free(d->stream.p);
        d->stream.p = NULL;
        check_exact(r, olen, W, H, c, ow, oh, ch, flip, what);
        skipped += d->stream.cap > 0;
        EXPECT_RC(fl_decode_crop_resize(d, r, olen, &c, ow, oh, ch, flip, x, &err), 0, &err);
        EXPECT_RC(fl_decode_crop_resize(noskip, r, olen, &c, ow, oh, ch, flip, y, &err), 0, &err);
        if (memcmp(x, y, n) != 0) {
            fprintf(stderr, "%s: restart skip changes crop %ux%u+%u+%u -> %ux%u\n", what, c.width,
                    c.height, c.x, c.y, ow, oh);
            fl_check_failures++;
        }
        free(x);
        free(y);
    }
    /* Most of these crops start several iMCU rows down: the skip must really run. */
    if (skipped < (size_t)count / 2) {
        fprintf(stderr, "%s: restart skip ran for only %zu of %d crops\n", what, skipped, count);
        fl_check_failures++;
    }
    fl_decoder_free(noskip);
    free(r);
}

static void restart_suite(const uint8_t *f, size_t len, uint32_t W, uint32_t H, uint32_t ch,
                          int count, const char *what)
{
    uint32_t intervals[] = {0, 1, 2, 3};
    for (size_t i = 0; i < sizeof intervals / sizeof intervals[0]; i++)
        restart_suite1(f, len, W, H, ch, intervals[i], count, what);
}

/* Random crops and output sizes, both scaled and full-scale, on one file. */
static void random_crops(const uint8_t *f, size_t len, uint32_t W, uint32_t H, int count,
                         const char *what)
{
    int fails = 0;
    if (quick)
        count /= 4;
    for (int i = 0; i < count && fails < 5; i++) {
        fl_rect r;
        r.width = 1 + rnd(W);
        r.height = 1 + rnd(H);
        r.x = rnd(W - r.width + 1);
        r.y = rnd(H - r.height + 1);
        uint32_t ow = 1 + rnd(i & 1 ? 64 : r.width + 8), oh = 1 + rnd(i & 1 ? 64 : r.height + 8);
        fails += check_exact(f, len, W, H, r, ow, oh, i % 3 ? 3 : 1, i & 2 ? 1 : 0, what);
    }
}

int main(int argc, char **argv)
{
    quick = argc > 1 && !strcmp(argv[1], "--quick");
    EXPECT_RC(fl_decoder_create(0, &d, &err), 0, &err);
    EXPECT_RC(fl_decoder_create(0, &dref, &err), 0, &err);
    fl_encoder *e;
    EXPECT_RC(fl_encoder_create(&e, &err), 0, &err);
    EXPECT_RC(fl_encoder_create(&rst_enc, &err), 0, &err);

    /* The loader's case: fl_encode_jpeg (4:2:0) of a 56×61 image, crop 23×24+7+6 → 28×20. */
    uint32_t W = 56, H = 61;
    uint8_t *rgb = synth_image(W, H, 3);
    fl_image im = {rgb, W, H, 3, (size_t)W * 3};
    const uint8_t *enc;
    size_t enc_len;
    EXPECT_RC(fl_encode_jpeg(e, &im, 90, &enc, &enc_len, &err), 0, &err);
    uint8_t *jpg = malloc(enc_len);
    memcpy(jpg, enc, enc_len);
    fl_rect loader_case = {7, 6, 23, 24};
    for (uint32_t ch = 1; ch <= 3; ch += 2)
        for (int flip = 0; flip < 2; flip++)
            check_exact(jpg, enc_len, W, H, loader_case, 28, 20, ch, flip, "loader 56x61");
    random_crops(jpg, enc_len, W, H, 150, "fl_encode_jpeg 56x61");
    restart_suite(jpg, enc_len, W, H, 3, 60, "restart 56x61");
    free(jpg);
    free(rgb);

    /* Every subsampling, baseline and progressive, odd sizes (partial iMCUs at both edges). */
    W = 203;
    H = 157;
    rgb = synth_image(W, H, 3);
    int samp[3][2] = {{2, 2}, {2, 1}, {1, 1}};
    const char *names[3] = {"4:2:0", "4:2:2", "4:4:4"};
    for (int s = 0; s < 3; s++)
        for (int prog = 0; prog < 2; prog++) {
            size_t len;
            uint8_t *f = write_jpeg(rgb, W, H, 3, JCS_RGB, 85, samp[s][0], samp[s][1], prog, &len);
            EXPECT(f != NULL);
            if (!f)
                continue;
            /* Crops starting and ending on iMCU boundaries and one pixel off them. */
            uint32_t xs[] = {0, 1, 15, 16, 17, 31, 32, 33, 100};
            for (size_t a = 0; a < sizeof xs / sizeof xs[0]; a++) {
                fl_rect r = {xs[a], xs[(a + 3) % 9], 16 + xs[(a + 5) % 9], 17 + xs[(a + 1) % 9]};
                check_exact(f, len, W, H, r, r.width, r.height, 3, 0, names[s]);
                check_exact(f, len, W, H, r, r.width / 2 + 1, r.height / 3 + 1, 3, 1, names[s]);
            }
            random_crops(f, len, W, H, 60, names[s]);
            restart_suite(f, len, W, H, (uint32_t)(1 + 2 * (s != 1)), 40, names[s]);
            free(f);
        }
    free(rgb);
    /* Gray (one component: MCU = one 8x8 block) and a tall image (restart markers wrap past RST7).
     */
    W = 77;
    H = 700;
    uint8_t *gray = synth_image(W, H, 1);
    size_t glen;
    uint8_t *g = write_jpeg(gray, W, H, 1, JCS_GRAYSCALE, 90, 1, 1, 0, &glen);
    EXPECT(g != NULL);
    if (g)
        restart_suite(g, glen, W, H, 1, 40, "gray 77x700");
    free(g);
    free(gray);
    rgb = synth_image(W, H, 3);
    g = write_jpeg(rgb, W, H, 3, JCS_RGB, 90, 2, 2, 1, &glen);
    EXPECT(g != NULL);
    if (g)
        restart_suite(g, glen, W, H, 3, 40, "progressive 4:2:0 77x700");
    free(g);
    free(rgb);
    fl_encoder_free(e);
    fl_encoder_free(rst_enc);
    fl_decoder_free(d);
    fl_decoder_free(dref);
    return fl_check_status();
}
