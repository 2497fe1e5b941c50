/* test_image_jpeg_scale.c — JPEG DCT-scaled decode: the smallest n/8 (1/8, 1/4, 1/2, 1) that still
 * covers the requested minimum size; the 1/2-scale image looks like the original shrunk by 2; odd
 * sizes round up as libjpeg does. */
#include "img_test.h"

static fl_decoder *d;
static fl_error err;

int main(void)
{
    fl_encoder *e;
    fl_image img;
    const uint8_t *enc;
    size_t enc_len;
    EXPECT_RC(fl_decoder_create(0, &d, &err), 0, &err);
    EXPECT_RC(fl_encoder_create(&e, &err), 0, &err);
    uint32_t w = 203, h = 117; /* not multiples of the MCU size */
    uint8_t *rgb = synth_image(w, h, 3), *gray = synth_image(w, h, 1);
    fl_image src = {rgb, w, h, 3, (size_t)w * 3};

    /* DCT scaling: the smallest n/8 (of 1/8, 1/4, 1/2, 1) still covering the minimum size. */
    {
        uint32_t W = 640, H = 480;
        uint8_t *big = synth_image(W, H, 3);
        fl_image bsrc = {big, W, H, 3, (size_t)W * 3};
        EXPECT_RC(fl_encode_jpeg(e, &bsrc, 90, &enc, &enc_len, &err), 0, &err);
        struct {
            uint32_t mw, mh, ew, eh;
        } cases[] = {{0, 0, 640, 480},      {320, 240, 320, 240}, {321, 100, 640, 480},
                     {300, 200, 320, 240},  {160, 120, 160, 120}, {100, 100, 160, 120},
                     {80, 60, 80, 60},      {1, 1, 80, 60},       {640, 480, 640, 480},
                     {2000, 2000, 640, 480}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            EXPECT_RC(fl_decode(d, enc, enc_len, 3, cases[i].mw, cases[i].mh, &img, &err), 0, &err);
            if (img.width != cases[i].ew || img.height != cases[i].eh)
                fprintf(stderr, "min %ux%u: got %ux%u want %ux%u\n", cases[i].mw, cases[i].mh,
                        img.width, img.height, cases[i].ew, cases[i].eh);
            EXPECT(img.width == cases[i].ew && img.height == cases[i].eh);
        }
        /* The 1/2-scale decode looks like the image shrunk by 2. */
        EXPECT_RC(fl_decode(d, enc, enc_len, 3, 320, 240, &img, &err), 0, &err);
        uint8_t *half = malloc(320 * 240 * 3);
        EXPECT_RC(fl_resize(big, W, H, W * 3, 3, half, 320, 240, 320 * 3, 0, NULL, 0, &err), 0,
                  &err);
        double q = psnr(img.pixels, half, 320 * 240 * 3);
        printf("1/2 scale vs resized original PSNR %.1f dB\n", q);
        EXPECT(q > 28);
        /* Odd sizes round up as libjpeg does: 203×117 at 1/2 → 102×59. */
        EXPECT_RC(fl_encode_jpeg(e, &src, 90, &enc, &enc_len, &err), 0, &err);
        EXPECT_RC(fl_decode(d, enc, enc_len, 3, 100, 50, &img, &err), 0, &err);
        EXPECT(img.width == 102 && img.height == 59);
        free(half);
        free(big);
    }

    fl_encoder_free(e);
    fl_decoder_free(d);
    free(rgb);
    free(gray);
    return fl_check_status();
}
