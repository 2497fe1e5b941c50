/* test_image_jpeg_bad.c — bad JPEG data: truncated and corrupt files (single-scan and progressive)
 * give FL_E_DECODE with a message and leave the decoder usable (only a missing EOI is accepted, for
 * a single-scan file); a 60000×60000 header or one over the decoder's pixel limit is FL_E_TOO_LARGE
 * without allocating. */
#include "img_test.h"

static fl_decoder *d;
static fl_error err;

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

    /* Truncated and corrupt: FL_E_DECODE with a message; the decoder stays usable. */
    for (int prog = 0; prog < 2; prog++) {
        uint8_t *f = write_jpeg(rgb, w, h, 3, JCS_RGB, 90, 2, 2, prog, &len);
        size_t cuts[] = {3, 100, len / 3, len / 2, len - 100, len - 3};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            int rc = fl_decode(d, f, cuts[i], 3, 0, 0, &img, &err);
            if (rc != FL_E_DECODE)
                fprintf(stderr, "cut at %zu/%zu (prog %d): rc %d\n", cuts[i], len, prog, rc);
            EXPECT(rc == FL_E_DECODE);
            EXPECT(err.msg[0] != 0);
        }
        /* Only the EOI marker missing: every pixel is there, accepted for a single-scan file; a
         * progressive file that ends early could be missing whole scans, so it stays an error. */
        if (!prog) {
            EXPECT_RC(fl_decode(d, f, len - 2, 3, 0, 0, &img, &err), 0, &err);
            EXPECT(psnr(img.pixels, rgb, (size_t)w * h * 3) > 30);
        } else {
            EXPECT_RC(fl_decode(d, f, len - 2, 3, 0, 0, &img, &err), FL_E_DECODE, &err);
        }
        EXPECT_RC(fl_decode(d, f, len / 2, 3, 0, 0, &img, &err), FL_E_DECODE, &err);
        EXPECT(strstr(err.msg, "Premature end") != NULL ||
               strstr(err.msg, "premature end") != NULL);
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
        EXPECT(rc == 0 || rc == FL_E_DECODE);
        /* A bad marker in the header is a hard error. */
        memcpy(bad, f, len);
        bad[3] = 0x01;
        bad[2] = 0x00;
        EXPECT_RC(fl_decode(d, bad, len, 3, 0, 0, &img, &err), FL_E_DECODE, &err);
        free(bad);
        EXPECT_RC(fl_decode(d, f, len, 3, 0, 0, &img, &err), 0, &err);
        EXPECT(psnr(img.pixels, rgb, (size_t)w * h * 3) > 30);
        free(f);
    }

    /* A header declaring 60000×60000 (followed by nothing): TOO_LARGE, not an allocation. */
    {
        const uint8_t big[] = {0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 8, 0xEA, 0x60, 0xEA, 0x60, 3,
                               1,    0x22, 0,    2,    0x11, 0,    3, 0x11, 0,    0xFF, 0xD9};
        EXPECT_RC(fl_decode(d, big, sizeof big, 3, 0, 0, &img, &err), FL_E_TOO_LARGE, &err);
        EXPECT(strstr(err.msg, "60000x60000") != NULL);
        fl_rect r = {0, 0, 100, 100};
        uint8_t out[16 * 16 * 3];
        EXPECT_RC(fl_decode_crop_resize(d, big, sizeof big, &r, 16, 16, 3, 0, out, &err),
                  FL_E_TOO_LARGE, &err);
        /* Same file through an image of the real size and a tight limit. */
        fl_decoder *tight;
        EXPECT_RC(fl_decoder_create((uint64_t)w * h - 1, &tight, &err), 0, &err);
        EXPECT_RC(fl_encode_jpeg(e, &src, 90, &enc, &enc_len, &err), 0, &err);
        EXPECT_RC(fl_decode(tight, enc, enc_len, 3, 0, 0, &img, &err), FL_E_TOO_LARGE, &err);
        fl_decoder_free(tight);
    }

    fl_encoder_free(e);
    fl_decoder_free(d);
    free(rgb);
    free(gray);
    return fl_check_status();
}
