/* test_image_jpeg.c — JPEG decode and encode: fl_encode_jpeg → fl_decode close to the original
 * (PSNR > 30 dB; fast DCT too; the encoder's buffer reused), gray, gray/CMYK → RGB, progressive,
 * 4:4:4/4:2:2/4:2:0. Sizes from DCT scaling: test_image_jpeg_scale; bad data: test_image_jpeg_bad.
 */
#include "img_test.h"

static fl_decoder *d;
static fl_error err;

/* Decode `f` to RGB at full size and compare with `ref` (w×h×3). */
static double decode_psnr(const uint8_t *f, size_t len, const uint8_t *ref, uint32_t w, uint32_t h)
{
    fl_image img;
    int rc = fl_decode(d, f, len, 3, 0, 0, &img, &err);
    if (rc) {
        fprintf(stderr, "decode failed: %s\n", err.msg);
        return 0;
    }
    if (img.width != w || img.height != h || img.channels != 3)
        return 0;
    return psnr(img.pixels, ref, (size_t)w * h * 3);
}

int main(void)
{
    fl_encoder *e;
    fl_image img;
    const uint8_t *enc;
    size_t enc_len, len;
    EXPECT_RC(fl_decoder_create(0, &d, &err), 0, &err);
    EXPECT_RC(fl_encoder_create(&e, &err), 0, &err);
    uint32_t w = 203, h = 117; /* not multiples of the MCU size */
    uint8_t *rgb = synth_image(w, h, 3), *gray = synth_image(w, h, 1);
    fl_image src = {rgb, w, h, 3, (size_t)w * 3};

    /* Our encoder: RGB 4:2:0 at q90, 4:4:4 at q95, gray. */
    EXPECT_RC(fl_encode_jpeg(e, &src, 90, &enc, &enc_len, &err), 0, &err);
    double p = decode_psnr(enc, enc_len, rgb, w, h);
    EXPECT(p > 30);
    printf("q90 4:2:0 PSNR %.1f dB, %zu bytes\n", p, enc_len);
    EXPECT_RC(fl_encode_jpeg(e, &src, 95, &enc, &enc_len, &err), 0, &err);
    EXPECT(decode_psnr(enc, enc_len, rgb, w, h) > 35);
    {
        fl_decoder *fast;
        EXPECT_RC(fl_decoder_create(0, &fast, &err), 0, &err);
        fl_decoder_set_flags(fast, FL_DECODE_FAST);
        EXPECT_RC(fl_decode(fast, enc, enc_len, 3, 0, 0, &img, &err), 0, &err);
        EXPECT(psnr(img.pixels, rgb, (size_t)w * h * 3) > 35);
        fl_decoder_free(fast);
    }
    const uint8_t *reused = enc;
    EXPECT_RC(fl_encode_jpeg(e, &src, 95, &enc, &enc_len, &err), 0, &err);
    EXPECT(enc == reused); /* the encoder's buffer is reused */
    fl_image gsrc = {gray, w, h, 1, w};
    EXPECT_RC(fl_encode_jpeg(e, &gsrc, 90, &enc, &enc_len, &err), 0, &err);
    EXPECT_RC(fl_decode(d, enc, enc_len, 1, 0, 0, &img, &err), 0, &err);
    EXPECT(img.width == w && img.height == h && img.channels == 1);
    EXPECT(psnr(img.pixels, gray, (size_t)w * h) > 30);
    EXPECT_RC(fl_encode_jpeg(e, &src, 0, &enc, &enc_len, &err), FL_E_INVALID, &err);

    /* Gray JPEG → RGB: three equal channels matching the gray decode. */
    {
        uint8_t *f = write_jpeg(gray, w, h, 1, JCS_GRAYSCALE, 92, 1, 1, 0, &len);
        EXPECT_RC(fl_decode(d, f, len, 1, 0, 0, &img, &err), 0, &err);
        uint8_t *g1 = malloc((size_t)w * h);
        memcpy(g1, img.pixels, (size_t)w * h);
        EXPECT_RC(fl_decode(d, f, len, 3, 0, 0, &img, &err), 0, &err);
        int ok = img.channels == 3;
        for (size_t i = 0; i < (size_t)w * h && ok; i++)
            ok &= img.pixels[3 * i] == g1[i] && img.pixels[3 * i + 1] == g1[i] &&
                  img.pixels[3 * i + 2] == g1[i];
        EXPECT(ok);
        free(g1);
        free(f);
    }

    /* Subsamplings and progressive: all close to the source. */
    int samp[3][2] = {{1, 1}, {2, 1}, {2, 2}};
    for (int s = 0; s < 3; s++)
        for (int prog = 0; prog < 2; prog++) {
            uint8_t *f = write_jpeg(rgb, w, h, 3, JCS_RGB, 92, samp[s][0], samp[s][1], prog, &len);
            fl_image_info info;
            EXPECT_RC(fl_image_probe(f, len, &info, &err), 0, &err);
            EXPECT(info.progressive == prog);
            double q = decode_psnr(f, len, rgb, w, h);
            if (!(q > 30))
                fprintf(stderr, "sampling %dx%d progressive %d: PSNR %.1f\n", samp[s][0],
                        samp[s][1], prog, q);
            EXPECT(q > 30);
            /* RGB → gray straight from libjpeg (Y channel) agrees with our luma of the RGB. */
            EXPECT_RC(fl_decode(d, f, len, 1, 0, 0, &img, &err), 0, &err);
            uint8_t *yref = malloc((size_t)w * h);
            for (size_t i = 0; i < (size_t)w * h; i++)
                yref[i] = (uint8_t)((19595u * rgb[3 * i] + 38470u * rgb[3 * i + 1] +
                                     7471u * rgb[3 * i + 2] + 32768u) >>
                                    16);
            EXPECT(psnr(img.pixels, yref, (size_t)w * h) > 30);
            free(yref);
            free(f);
        }

    /* CMYK with an Adobe marker (libjpeg writes one): stored inverted, R = C·K/255. */
    {
        uint8_t *cmyk = malloc((size_t)w * h * 4);
        for (size_t i = 0; i < (size_t)w * h; i++) {
            /* Pick inverted CMYK whose RGB is the synthetic image: K = 255, C = R, M = G, Y = B. */
            cmyk[4 * i] = rgb[3 * i];
            cmyk[4 * i + 1] = rgb[3 * i + 1];
            cmyk[4 * i + 2] = rgb[3 * i + 2];
            cmyk[4 * i + 3] = 255;
        }
        /* Half the image with K < 255 so K matters: RGB = CMY·K/255. */
        uint8_t *ref = malloc((size_t)w * h * 3);
        for (size_t i = 0; i < (size_t)w * h; i++) {
            if (i % w >= w / 2)
                cmyk[4 * i + 3] = 200;
            for (int c = 0; c < 3; c++)
                ref[3 * i + c] = (uint8_t)((cmyk[4 * i + c] * cmyk[4 * i + 3] + 127) / 255);
        }
        uint8_t *f = write_jpeg(cmyk, w, h, 4, JCS_CMYK, 95, 1, 1, 0, &len);
        fl_image_info info;
        EXPECT_RC(fl_image_probe(f, len, &info, &err), 0, &err);
        EXPECT(info.components == 4);
        double q = decode_psnr(f, len, ref, w, h);
        printf("CMYK PSNR %.1f dB\n", q);
        EXPECT(q > 30);
        EXPECT_RC(fl_decode(d, f, len, 1, 0, 0, &img, &err), 0, &err);
        EXPECT(img.channels == 1 && img.width == w);
        free(f);
        free(cmyk);
        free(ref);
    }

    fl_encoder_free(e);
    fl_decoder_free(d);
    free(rgb);
    free(gray);
    return fl_check_status();
}
