/* test_image_crop.c — fl_decode_crop_resize against the reference "decode full size, cut the
 * crop, fl_resize it": JPEG (4:2:0, 4:4:4, 4:2:2, progressive, gray, CMYK; DCT-scaled and not)
 * within a small tolerance, PNG exactly; crops at every image edge; flip; FL_E_RANGE for crops
 * outside the image; truncated data → FL_E_DECODE; the JPEG crop decoder itself refuses a window
 * outside the decoded frame (a file whose header disagrees with its probed size: found by fuzzing,
 * it used to ask for a 128 GiB buffer). */
#include "image_internal.h"
#include "img_test.h"

static fl_decoder *d, *dref;
static fl_error err;
static double worst_mean, worst_max_scaled, worst_max_full;

/* Compare one crop with the reference. exact: require identical bytes. */
static void check_crop(const uint8_t *f, size_t len, fl_rect r, uint32_t ow, uint32_t oh,
                       uint32_t ch, int flip, int exact, const char *what)
{
    fl_image full;
    int rc = fl_decode(dref, f, len, ch, 0, 0, &full, &err);
    EXPECT_RC(rc, 0, &err);
    if (rc)
        return;
    size_t n = (size_t)ow * oh * ch;
    uint8_t *got = malloc(n), *want = malloc(n);
    memset(got, 0xAB, n);
    EXPECT_RC(fl_decode_crop_resize(d, f, len, &r, ow, oh, ch, flip, got, &err), 0, &err);
    const uint8_t *sub = full.pixels + (size_t)r.y * full.stride + (size_t)r.x * ch;
    EXPECT_RC(fl_resize(sub, r.width, r.height, full.stride, ch, want, ow, oh, (size_t)ow * ch,
                        flip, NULL, 0, &err),
              0, &err);
    if (exact) {
        if (memcmp(got, want, n) != 0)
            fprintf(stderr, "%s: crop %ux%u+%u+%u differs\n", what, r.width, r.height, r.x, r.y);
        EXPECT(memcmp(got, want, n) == 0);
    } else {
        double mean = mean_abs_diff(got, want, n);
        int maxd = max_abs_diff(got, want, n);
        /* DCT-scaled decoding is a different (sharper) low-pass than full decode + triangle
         * filter, so allow a few levels on average; full-scale crops must be near-exact. */
        int scaled =
            (uint64_t)r.width * 4 >= (uint64_t)ow * 8 && (uint64_t)r.height * 4 >= (uint64_t)oh * 8;
        if (mean > worst_mean)
            worst_mean = mean;
        if (scaled && maxd > worst_max_scaled)
            worst_max_scaled = maxd;
        if (!scaled && maxd > worst_max_full)
            worst_max_full = maxd;
        int ok = mean < 2.0 && maxd <= (scaled ? 40 : 12);
        if (!ok)
            fprintf(stderr, "%s: crop %ux%u+%u+%u -> %ux%u ch %u flip %d: mean %.2f max %d\n", what,
                    r.width, r.height, r.x, r.y, ow, oh, ch, flip, mean, maxd);
        EXPECT(ok);
    }
    free(got);
    free(want);
}

static void crop_suite(const uint8_t *f, size_t len, uint32_t W, uint32_t H, int exact,
                       const char *what)
{
    fl_rect crops[] = {
        {0, 0, W, H},                         /* whole image */
        {0, 0, W / 2, H / 2},                 /* top-left corner */
        {W - W / 3, H - H / 3, W / 3, H / 3}, /* bottom-right corner, to the last pixel */
        {W / 5, H / 7, W / 2 + 3, H / 2 + 1}, /* interior, odd offsets */
        {W - 40, 0, 40, H},                   /* right strip */
        {0, H - 1, W, 1},                     /* last row */
        {17, 9, 1, 1},                        /* one pixel */
        {3, 5, W - 3, H - 5},
    };
    uint32_t outs[][2] = {{64, 64}, {32, 48}, {100, 90}, {224, 224}};
    for (size_t c = 0; c < sizeof crops / sizeof crops[0]; c++)
        for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++)
            for (uint32_t ch = 1; ch <= 3; ch += 2)
                check_crop(f, len, crops[c], outs[o][0], outs[o][1], ch, (int)((c + o) & 1), exact,
                           what);
}

int main(void)
{
    EXPECT_RC(fl_decoder_create(0, &d, &err), 0, &err);
    EXPECT_RC(fl_decoder_create(0, &dref, &err), 0, &err);
    uint32_t W = 397, H = 283;
    uint8_t *rgb = synth_image(W, H, 3), *gray = synth_image(W, H, 1);
    size_t len;

    int samp[3][2] = {{2, 2}, {1, 1}, {2, 1}};
    const char *names[3] = {"jpeg 4:2:0", "jpeg 4:4:4", "jpeg 4:2:2"};
    for (int s = 0; s < 3; s++)
        for (int prog = 0; prog < 2; prog++) {
            uint8_t *f = write_jpeg(rgb, W, H, 3, JCS_RGB, 90, samp[s][0], samp[s][1], prog, &len);
            crop_suite(f, len, W, H, 0, names[s]);
            free(f);
        }
    /* FL_DECODE_FAST (box chroma upsampling, fast IDCT) stays within the same tolerance. */
    {
        fl_decoder_set_flags(d, FL_DECODE_FAST);
        uint8_t *ff = write_jpeg(rgb, W, H, 3, JCS_RGB, 90, 2, 2, 0, &len);
        crop_suite(ff, len, W, H, 0, "jpeg 4:2:0 fast");
        free(ff);
        fl_decoder_set_flags(d, 0);
    }
    uint8_t *f = write_jpeg(gray, W, H, 1, JCS_GRAYSCALE, 90, 1, 1, 0, &len);
    crop_suite(f, len, W, H, 0, "jpeg gray");
    free(f);
    uint8_t *cmyk = malloc((size_t)W * H * 4);
    for (size_t i = 0; i < (size_t)W * H; i++) {
        memcpy(cmyk + 4 * i, rgb + 3 * i, 3);
        cmyk[4 * i + 3] = (uint8_t)(200 + i % 50);
    }
    f = write_jpeg(cmyk, W, H, 4, JCS_CMYK, 90, 1, 1, 0, &len);
    crop_suite(f, len, W, H, 0, "jpeg cmyk");
    free(f);
    free(cmyk);
    printf("JPEG crop vs reference: worst mean %.2f, worst max %.0f (DCT-scaled) / %.0f (full "
           "scale)\n",
           worst_mean, worst_max_scaled, worst_max_full);

    /* PNG goes through full decode + the same resampler: exact. */
    fl_encoder *e;
    EXPECT_RC(fl_encoder_create(&e, &err), 0, &err);
    fl_image src = {rgb, W, H, 3, (size_t)W * 3};
    const uint8_t *enc;
    size_t enc_len;
    EXPECT_RC(fl_encode_png(e, &src, &enc, &enc_len, &err), 0, &err);
    uint8_t *png = malloc(enc_len);
    memcpy(png, enc, enc_len);
    crop_suite(png, enc_len, W, H, 1, "png");

    /* Crops outside the image. */
    uint8_t out[8 * 8 * 3];
    fl_rect bad[] = {
        {0, 0, W + 1, 10}, {W, 0, 1, 1}, {10, H - 5, 10, 6}, {0, 0, 0, 5}, {UINT32_MAX, 0, 2, 2}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        EXPECT_RC(fl_decode_crop_resize(d, png, enc_len, &bad[i], 8, 8, 3, 0, out, &err),
                  FL_E_RANGE, &err);
    }
    EXPECT(strstr(err.msg, "outside") != NULL);
    fl_rect ok = {0, 0, 8, 8};
    EXPECT_RC(fl_decode_crop_resize(d, png, enc_len, &ok, 0, 8, 3, 0, out, &err), FL_E_INVALID,
              &err);

    /* Truncated JPEG: a crop that needs the missing rows fails cleanly; the decoder recovers. */
    f = write_jpeg(rgb, W, H, 3, JCS_RGB, 90, 2, 2, 0, &len);
    size_t flen = len;
    fl_rect bottom = {0, H - 20, W, 20};
    EXPECT_RC(fl_decode_crop_resize(d, f, len / 2, &bottom, 8, 8, 3, 0, out, &err), FL_E_DECODE,
              &err);
    uint8_t *pf = write_jpeg(rgb, W, H, 3, JCS_RGB, 90, 2, 2, 1, &len);
    EXPECT_RC(fl_decode_crop_resize(d, pf, len / 2, &bottom, 8, 8, 3, 0, out, &err), FL_E_DECODE,
              &err);
    EXPECT_RC(fl_decode_crop_resize(d, pf, len, &bottom, 8, 8, 3, 0, out, &err), 0, &err);
    free(pf);

    /* The crop decoder below fl_decode_crop_resize's range check: a window past the frame the
     * decoder reads (as when a crafted header disagrees with the probe) is an error. */
    fl_image img;
    double win[4];
    fl_rect far = {4 * W, 0, W / 2, H / 2}, low = {0, 4 * H, W / 2, H / 2};
    EXPECT_RC(fl_jpeg_decode_crop(d, f, flen, &far, 8, 8, 3, &img, win, &err), FL_E_DECODE, &err);
    EXPECT(strstr(err.msg, "outside") != NULL);
    EXPECT_RC(fl_jpeg_decode_crop(d, f, flen, &low, 8, 8, 3, &img, win, &err), FL_E_DECODE, &err);
    fl_rect inside = {W / 4, H / 4, W / 2, H / 2};
    EXPECT_RC(fl_jpeg_decode_crop(d, f, flen, &inside, 8, 8, 3, &img, win, &err), 0, &err);
    free(f);

    free(png);
    fl_encoder_free(e);
    free(rgb);
    free(gray);
    fl_decoder_free(d);
    fl_decoder_free(dref);
    return fl_check_status();
}
