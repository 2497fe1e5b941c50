/* test_image_jpeg.c — JPEG: fl_encode_jpeg → fl_decode close to the original (PSNR > 30 dB),
 * DCT-scaled decode sizes, gray/CMYK → RGB, progressive, 4:4:4/4:2:2/4:2:0, truncated/corrupt
 * data → FL_E_DECODE, and a 60000×60000 header → FL_E_TOO_LARGE without allocating. */
#include "img_test.h"

static fl_decoder *d;
static fl_error err;

/* Decode `f` to RGB at full size and compare with `ref` (w×h×3). */
static double decode_psnr(const uint8_t *f, size_t len, const uint8_t *ref, uint32_t w, uint32_t h) {
    fl_image img;
    int rc = fl_decode(d, f, len, 3, 0, 0, &img, &err);
    if (rc) {
        fprintf(stderr, "decode failed: %s\n", err.msg);
        return 0;
    }
    if (img.width != w || img.height != h || img.channels != 3) return 0;
    return psnr(img.pixels, ref, (size_t)w * h * 3);
}

int main(void) {
    fl_encoder *e;
    fl_image img;
    const uint8_t *enc;
    size_t enc_len, len;
    CHECK_RC(fl_decoder_create(0, &d, &err), 0, &err);
    CHECK_RC(fl_encoder_create(&e, &err), 0, &err);
    uint32_t w = 203, h = 117; /* not multiples of the MCU size */
    uint8_t *rgb = synth_image(w, h, 3), *gray = synth_image(w, h, 1);

    /* Our encoder: RGB 4:2:0 at q90, 4:4:4 at q95, gray. */
    fl_image src = {rgb, w, h, 3, (size_t)w * 3};
    CHECK_RC(fl_encode_jpeg(e, &src, 90, &enc, &enc_len, &err), 0, &err);
    double p = decode_psnr(enc, enc_len, rgb, w, h);
    CHECK(p > 30);
    printf("q90 4:2:0 PSNR %.1f dB, %zu bytes\n", p, enc_len);
    CHECK_RC(fl_encode_jpeg(e, &src, 95, &enc, &enc_len, &err), 0, &err);
    CHECK(decode_psnr(enc, enc_len, rgb, w, h) > 35);
    {
        fl_decoder *fast;
        CHECK_RC(fl_decoder_create(0, &fast, &err), 0, &err);
        fl_decoder_set_flags(fast, FL_DECODE_FAST);
        CHECK_RC(fl_decode(fast, enc, enc_len, 3, 0, 0, &img, &err), 0, &err);
        CHECK(psnr(img.pixels, rgb, (size_t)w * h * 3) > 35);
        fl_decoder_free(fast);
    }
    const uint8_t *reused = enc;
    CHECK_RC(fl_encode_jpeg(e, &src, 95, &enc, &enc_len, &err), 0, &err);
    CHECK(enc == reused); /* the encoder's buffer is reused */
    fl_image gsrc = {gray, w, h, 1, w};
    CHECK_RC(fl_encode_jpeg(e, &gsrc, 90, &enc, &enc_len, &err), 0, &err);
    CHECK_RC(fl_decode(d, enc, enc_len, 1, 0, 0, &img, &err), 0, &err);
    CHECK(img.width == w && img.height == h && img.channels == 1);
    CHECK(psnr(img.pixels, gray, (size_t)w * h) > 30);
    CHECK_RC(fl_encode_jpeg(e, &src, 0, &enc, &enc_len, &err), FL_E_INVALID, &err);

    /* Gray JPEG → RGB: three equal channels matching the gray decode. */
    {
        uint8_t *f = write_jpeg(gray, w, h, 1, JCS_GRAYSCALE, 92, 1, 1, 0, &len);
        CHECK_RC(fl_decode(d, f, len, 1, 0, 0, &img, &err), 0, &err);
        uint8_t *g1 = malloc((size_t)w * h);
        memcpy(g1, img.pixels, (size_t)w * h);
        CHECK_RC(fl_decode(d, f, len, 3, 0, 0, &img, &err), 0, &err);
        int ok = img.channels == 3;
        for (size_t i = 0; i < (size_t)w * h && ok; i++)
            ok &= img.pixels[3 * i] == g1[i] && img.pixels[3 * i + 1] == g1[i] && img.pixels[3 * i + 2] == g1[i];
        CHECK(ok);
        free(g1);
        free(f);
    }

    /* Subsamplings and progressive: all close to the source. */
    int samp[3][2] = {{1, 1}, {2, 1}, {2, 2}};
    for (int s = 0; s < 3; s++)
        for (int prog = 0; prog < 2; prog++) {
            uint8_t *f = write_jpeg(rgb, w, h, 3, JCS_RGB, 92, samp[s][0], samp[s][1], prog, &len);
            fl_image_info info;
            CHECK_RC(fl_image_probe(f, len, &info, &err), 0, &err);
            CHECK(info.progressive == prog);
            double q = decode_psnr(f, len, rgb, w, h);
            if (!(q > 30)) fprintf(stderr, "sampling %dx%d progressive %d: PSNR %.1f\n", samp[s][0], samp[s][1], prog, q);
            CHECK(q > 30);
            /* RGB → gray straight from libjpeg (Y channel) agrees with our luma of the RGB. */
            CHECK_RC(fl_decode(d, f, len, 1, 0, 0, &img, &err), 0, &err);
            uint8_t *yref = malloc((size_t)w * h);
            for (size_t i = 0; i < (size_t)w * h; i++)
                yref[i] = (uint8_t)((19595u * rgb[3 * i] + 38470u * rgb[3 * i + 1] + 7471u * rgb[3 * i + 2] + 32768u) >> 16);
            CHECK(psnr(img.pixels, yref, (size_t)w * h) > 30);
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
            if (i % w >= w / 2) cmyk[4 * i + 3] = 200;
            for (int c = 0; c < 3; c++) ref[3 * i + c] = (uint8_t)((cmyk[4 * i + c] * cmyk[4 * i + 3] + 127) / 255);
        }
        uint8_t *f = write_jpeg(cmyk, w, h, 4, JCS_CMYK, 95, 1, 1, 0, &len);
        fl_image_info info;
        CHECK_RC(fl_image_probe(f, len, &info, &err), 0, &err);
        CHECK(info.components == 4);
        double q = decode_psnr(f, len, ref, w, h);
        printf("CMYK PSNR %.1f dB\n", q);
        CHECK(q > 30);
        CHECK_RC(fl_decode(d, f, len, 1, 0, 0, &img, &err), 0, &err);
        CHECK(img.channels == 1 && img.width == w);
        free(f);
        free(cmyk);
        free(ref);
    }

    /* DCT scaling: the smallest n/8 (of 1/8, 1/4, 1/2, 1) still covering the minimum size. */
    {
        uint32_t W = 640, H = 480;
        uint8_t *big = synth_image(W, H, 3);
        fl_image bsrc = {big, W, H, 3, (size_t)W * 3};
        CHECK_RC(fl_encode_jpeg(e, &bsrc, 90, &enc, &enc_len, &err), 0, &err);
        struct { uint32_t mw, mh, ew, eh; } cases[] = {
            {0, 0, 640, 480},   {320, 240, 320, 240}, {321, 100, 640, 480}, {300, 200, 320, 240},
            {160, 120, 160, 120}, {100, 100, 160, 120}, {80, 60, 80, 60},   {1, 1, 80, 60},
            {640, 480, 640, 480}, {2000, 2000, 640, 480}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            CHECK_RC(fl_decode(d, enc, enc_len, 3, cases[i].mw, cases[i].mh, &img, &err), 0, &err);
            if (img.width != cases[i].ew || img.height != cases[i].eh)
                fprintf(stderr, "min %ux%u: got %ux%u want %ux%u\n", cases[i].mw, cases[i].mh,
                        img.width, img.height, cases[i].ew, cases[i].eh);
            CHECK(img.width == cases[i].ew && img.height == cases[i].eh);
        }
        /* The 1/2-scale decode looks like the image shrunk by 2. */
        CHECK_RC(fl_decode(d, enc, enc_len, 3, 320, 240, &img, &err), 0, &err);
        uint8_t *half = malloc(320 * 240 * 3);
        CHECK_RC(fl_resize(big, W, H, W * 3, 3, half, 320, 240, 320 * 3, 0, NULL, 0, &err), 0, &err);
        double q = psnr(img.pixels, half, 320 * 240 * 3);
        printf("1/2 scale vs resized original PSNR %.1f dB\n", q);
        CHECK(q > 28);
        /* Odd sizes round up as libjpeg does: 203×117 at 1/2 → 102×59. */
        CHECK_RC(fl_encode_jpeg(e, &src, 90, &enc, &enc_len, &err), 0, &err);
        CHECK_RC(fl_decode(d, enc, enc_len, 3, 100, 50, &img, &err), 0, &err);
        CHECK(img.width == 102 && img.height == 59);
        free(half);
        free(big);
    }

    /* Truncated and corrupt: FL_E_DECODE with a message; the decoder stays usable. */
    for (int prog = 0; prog < 2; prog++) {
        uint8_t *f = write_jpeg(rgb, w, h, 3, JCS_RGB, 90, 2, 2, prog, &len);
        size_t cuts[] = {3, 100, len / 3, len / 2, len - 100, len - 3};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            int rc = fl_decode(d, f, cuts[i], 3, 0, 0, &img, &err);
            if (rc != FL_E_DECODE) fprintf(stderr, "cut at %zu/%zu (prog %d): rc %d\n", cuts[i], len, prog, rc);
            CHECK(rc == FL_E_DECODE);
            CHECK(err.msg[0] != 0);
        }
        /* Only the EOI marker missing: every pixel is there, accepted for a single-scan file; a
         * progressive file that ends early could be missing whole scans, so it stays an error. */
        if (!prog) {
            CHECK_RC(fl_decode(d, f, len - 2, 3, 0, 0, &img, &err), 0, &err);
            CHECK(psnr(img.pixels, rgb, (size_t)w * h * 3) > 30);
        } else {
            CHECK_RC(fl_decode(d, f, len - 2, 3, 0, 0, &img, &err), FL_E_DECODE, &err);
        }
        CHECK_RC(fl_decode(d, f, len / 2, 3, 0, 0, &img, &err), FL_E_DECODE, &err);
        CHECK(strstr(err.msg, "Premature end") != NULL || strstr(err.msg, "premature end") != NULL);
        /* Corrupt entropy data: overwrite a run in the middle with garbage (not markers). */
        uint8_t *bad = malloc(len);
        memcpy(bad, f, len);
        uint32_t x = 12345;
        for (size_t i = len / 2; i < len / 2 + 64; i++) {
            x = x * 1103515245u + 12345u;
            bad[i] = (uint8_t)(x >> 16) == 0xFF ? 0xD9 : (uint8_t)(x >> 16);
        }
        int rc = fl_decode(d, bad, len, 3, 0, 0, &img, &err);
        /* Garbage Huffman data may still decode (to wrong pixels) in a way libjpeg cannot detect;
         * what matters is no crash and a clean error or a full-size image. */
        CHECK(rc == 0 || rc == FL_E_DECODE);
        /* A bad marker in the header is a hard error. */
        memcpy(bad, f, len);
        bad[3] = 0x01;
        bad[2] = 0x00;
        CHECK_RC(fl_decode(d, bad, len, 3, 0, 0, &img, &err), FL_E_DECODE, &err);
        free(bad);
        CHECK_RC(fl_decode(d, f, len, 3, 0, 0, &img, &err), 0, &err);
        CHECK(psnr(img.pixels, rgb, (size_t)w * h * 3) > 30);
        free(f);
    }

    /* A header declaring 60000×60000 (followed by nothing): TOO_LARGE, not an allocation. */
    {
        const uint8_t big[] = {0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 8, 0xEA, 0x60, 0xEA, 0x60, 3,
                               1, 0x22, 0, 2, 0x11, 0, 3, 0x11, 0, 0xFF, 0xD9};
        CHECK_RC(fl_decode(d, big, sizeof big, 3, 0, 0, &img, &err), FL_E_TOO_LARGE, &err);
        CHECK(strstr(err.msg, "60000x60000") != NULL);
        fl_rect r = {0, 0, 100, 100};
        uint8_t out[16 * 16 * 3];
        CHECK_RC(fl_decode_crop_resize(d, big, sizeof big, &r, 16, 16, 3, 0, out, &err), FL_E_TOO_LARGE, &err);
        /* Same file through an image of the real size and a tight limit. */
        fl_decoder *tight;
        CHECK_RC(fl_decoder_create((uint64_t)w * h - 1, &tight, &err), 0, &err);
        CHECK_RC(fl_encode_jpeg(e, &src, 90, &enc, &enc_len, &err), 0, &err);
        CHECK_RC(fl_decode(tight, enc, enc_len, 3, 0, 0, &img, &err), FL_E_TOO_LARGE, &err);
        fl_decoder_free(tight);
    }

    fl_encoder_free(e);
    fl_decoder_free(d);
    free(rgb);
    free(gray);
    TEST_DONE();
}
