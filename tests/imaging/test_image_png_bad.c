/* test_image_png_bad.c — bad PNG data: truncated files and a flipped byte inside IDAT give
 * FL_E_DECODE ("PNG: ...") and leave the decoder usable; a valid IHDR declaring 60000×60000, or an
 * image over the decoder's pixel limit, is FL_E_TOO_LARGE before any allocation; an unsupported
 * channel count is FL_E_INVALID. */
#include "img_test.h"

static uint32_t crc32_png(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & -(c & 1));
    }
    return ~c;
}

int main(void)
{
    fl_error err;
    fl_decoder *d;
    fl_encoder *e;
    fl_image img;
    const uint8_t *enc;
    size_t enc_len;
    EXPECT_RC(fl_decoder_create(0, &d, &err), 0, &err);
    EXPECT_RC(fl_encoder_create(&e, &err), 0, &err);

    /* Truncated and corrupt files: FL_E_DECODE, never a crash. */
    {
        uint8_t *pix = synth_image(64, 48, 3);
        fl_image src = {pix, 64, 48, 3, 64 * 3};
        EXPECT_RC(fl_encode_png(e, &src, &enc, &enc_len, &err), 0, &err);
        uint8_t *copy = malloc(enc_len);
        memcpy(copy, enc, enc_len);
        size_t cuts[] = {8, 33, 40, enc_len / 2, enc_len - 13};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            EXPECT_RC(fl_decode(d, copy, cuts[i], 3, 0, 0, &img, &err), FL_E_DECODE, &err);
        }
        /* A flipped byte inside IDAT: CRC mismatch on a critical chunk. */
        copy[enc_len / 2] ^= 0x55;
        EXPECT_RC(fl_decode(d, copy, enc_len, 3, 0, 0, &img, &err), FL_E_DECODE, &err);
        EXPECT(strncmp(err.msg, "PNG: ", 5) == 0);
        /* The decoder still works afterwards. */
        copy[enc_len / 2] ^= 0x55;
        EXPECT_RC(fl_decode(d, copy, enc_len, 3, 0, 0, &img, &err), 0, &err);
        EXPECT(memcmp(img.pixels, pix, 64 * 48 * 3) == 0);
        free(copy);
        free(pix);
    }

    /* A valid IHDR declaring 60000×60000: refused before any allocation. */
    {
        uint8_t f[8 + 25 + 12];
        memcpy(f, "\x89PNG\r\n\x1a\n", 8);
        uint8_t ihdr[25] = {0,    0, 0, 13,   'I',  'H', 'D', 'R', 0, 0, 0xEA,
                            0x60, 0, 0, 0xEA, 0x60, 8,   2,   0,   0, 0};
        uint32_t c = crc32_png(ihdr + 4, 17);
        ihdr[21] = (uint8_t)(c >> 24), ihdr[22] = (uint8_t)(c >> 16), ihdr[23] = (uint8_t)(c >> 8),
        ihdr[24] = (uint8_t)c;
        memcpy(f + 8, ihdr, 25);
        memcpy(f + 33, "\0\0\0\0IEND\xae\x42\x60\x82", 12);
        EXPECT_RC(fl_decode(d, f, sizeof f, 3, 0, 0, &img, &err), FL_E_TOO_LARGE, &err);
        EXPECT(strstr(err.msg, "60000x60000") != NULL);
        fl_decoder *small;
        EXPECT_RC(fl_decoder_create(100, &small, &err), 0, &err);
        uint8_t *pix = synth_image(11, 10, 1);
        fl_image src = {pix, 11, 10, 1, 11};
        EXPECT_RC(fl_encode_png(e, &src, &enc, &enc_len, &err), 0, &err);
        EXPECT_RC(fl_decode(small, enc, enc_len, 1, 0, 0, &img, &err), FL_E_TOO_LARGE, &err);
        src.width = 10;
        EXPECT_RC(fl_encode_png(e, &src, &enc, &enc_len, &err), 0, &err);
        EXPECT_RC(fl_decode(small, enc, enc_len, 1, 0, 0, &img, &err), 0, &err);
        fl_decoder_free(small);
        free(pix);
    }
    EXPECT_RC(fl_decode(d, (const uint8_t *)"abc", 3, 2, 0, 0, &img, &err), FL_E_INVALID, &err);

    fl_encoder_free(e);
    fl_decoder_free(d);
    return fl_check_status();
}
