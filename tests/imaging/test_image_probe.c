/* test_image_probe.c — fl_image_probe: JPEG/PNG recognised by their bytes with the declared
 * size, progressive flag and components; garbage, empty and truncated headers refused. */
#include "img_test.h"

int main(void)
{
    fl_error err;
    fl_image_info info;
    uint8_t *pix = synth_image(37, 21, 3);
    size_t len;

    uint8_t *j = write_jpeg(pix, 37, 21, 3, JCS_RGB, 90, 2, 2, 0, &len);
    EXPECT_RC(fl_image_probe(j, len, &info, &err), 0, &err);
    EXPECT(info.format == FL_IMG_JPEG && info.width == 37 && info.height == 21);
    EXPECT(info.components == 3 && info.progressive == 0);
    /* Header only: the first 300 bytes still carry the SOF. */
    EXPECT_RC(fl_image_probe(j, len < 300 ? len : 300, &info, &err), 0, &err);
    EXPECT(info.width == 37);
    /* Cut inside the markers before the SOF. */
    EXPECT_RC(fl_image_probe(j, 30, &info, &err), FL_E_DECODE, &err);
    free(j);

    j = write_jpeg(pix, 37, 21, 3, JCS_RGB, 90, 1, 1, 1, &len);
    EXPECT_RC(fl_image_probe(j, len, &info, &err), 0, &err);
    EXPECT(info.progressive == 1 && info.width == 37 && info.height == 21);
    free(j);

    uint8_t *g = synth_image(16, 9, 1);
    j = write_jpeg(g, 16, 9, 1, JCS_GRAYSCALE, 90, 1, 1, 0, &len);
    EXPECT_RC(fl_image_probe(j, len, &info, &err), 0, &err);
    EXPECT(info.components == 1 && info.width == 16 && info.height == 9);
    free(j);

    uint8_t *p = write_png(pix, 37 * 3, 37, 21, 8, PNG_COLOR_TYPE_RGB, NULL, 0, NULL, 0, 0, &len);
    EXPECT_RC(fl_image_probe(p, len, &info, &err), 0, &err);
    EXPECT(info.format == FL_IMG_PNG && info.width == 37 && info.height == 21 &&
           info.components == 3);
    EXPECT_RC(fl_image_probe(p, 20, &info, &err), FL_E_DECODE, &err);
    free(p);
    p = write_png(g, 16, 16, 9, 8, PNG_COLOR_TYPE_GRAY, NULL, 0, NULL, 0, 1, &len);
    EXPECT_RC(fl_image_probe(p, len, &info, &err), 0, &err);
    EXPECT(info.components == 1 && info.progressive == 1);
    free(p);

    /* formats we recognise only to name them: unsupported, not "corrupt" */
    const uint8_t gif[] = "GIF89a this is not an image we read";
    EXPECT_RC(fl_image_probe(gif, sizeof gif, &info, &err), FL_E_UNSUPPORTED, &err);
    EXPECT(info.format == FL_IMG_UNKNOWN);
    EXPECT(strstr(err.msg, "GIF") != NULL);
    const uint8_t bmp[] = "BM\x46\0\0\0\0\0\0\0\x36\0\0\0\x28\0";
    EXPECT_RC(fl_image_probe(bmp, sizeof bmp, &info, &err), FL_E_UNSUPPORTED, &err);
    EXPECT(strstr(err.msg, "BMP") != NULL);
    const uint8_t garbage[] = "this is not an image we read";
    EXPECT_RC(fl_image_probe(garbage, sizeof garbage, &info, &err), FL_E_DECODE, &err);
    EXPECT(info.format == FL_IMG_UNKNOWN);
    EXPECT(strstr(err.msg, "not a JPEG, PNG or WebP") != NULL);
    EXPECT_RC(fl_image_probe(garbage, 0, &info, &err), FL_E_DECODE, &err);
    const uint8_t soi_only[] = {0xFF, 0xD8, 0xFF};
    EXPECT_RC(fl_image_probe(soi_only, sizeof soi_only, &info, &err), FL_E_DECODE, &err);
    /* A segment length pointing past the end. */
    const uint8_t badlen[] = {0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xF0, 0, 0};
    EXPECT_RC(fl_image_probe(badlen, sizeof badlen, &info, &err), FL_E_DECODE, &err);
    /* SOS before any SOF. */
    const uint8_t nosof[] = {0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02};
    EXPECT_RC(fl_image_probe(nosof, sizeof nosof, &info, &err), FL_E_DECODE, &err);
    /* FF 00 where a marker should be: libjpeg skips it as garbage and resynchronises on another
     * frame header than a marker walk would find, so probe refuses the file (found by fuzzing:
     * the two sizes disagreed). */
    const uint8_t stuffed[] = {0xFF, 0xD8, 0xFF, 0x00, 0x00, 0x04, 0, 0, 0xFF, 0xC0, 0x00,
                               0x0B, 8,    0,    8,    0,    8,    1, 1, 0x11, 0};
    EXPECT_RC(fl_image_probe(stuffed, sizeof stuffed, &info, &err), FL_E_DECODE, &err);
    EXPECT(strstr(err.msg, "no marker at byte 2") != NULL);
    /* A 60000×60000 SOF is reported as declared (the decoder, not probe, refuses it). */
    const uint8_t big[] = {0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 8, 0xEA, 0x60, 0xEA, 0x60,
                           3,    1,    0x22, 0,    2,    0x11, 1, 3,    0x11, 1};
    EXPECT_RC(fl_image_probe(big, sizeof big, &info, &err), 0, &err);
    EXPECT(info.width == 60000 && info.height == 60000);
    /* JPEGs libjpeg-turbo 2.1 cannot decode are unsupported, named (packdata keep refuses them
     * rather than store records the loader would fail on): 12-bit (SOF1), lossless (SOF3) */
    const uint8_t p12[] = {0xFF, 0xD8, 0xFF, 0xC1, 0x00, 0x0B, 12, 0, 8, 0, 8, 1, 1, 0x11, 0};
    EXPECT_RC(fl_image_probe(p12, sizeof p12, &info, &err), FL_E_UNSUPPORTED, &err);
    EXPECT(strstr(err.msg, "12-bit") != NULL);
    const uint8_t lossless[] = {0xFF, 0xD8, 0xFF, 0xC3, 0x00, 0x0B, 8, 0, 8, 0, 8, 1, 1, 0x11, 0};
    EXPECT_RC(fl_image_probe(lossless, sizeof lossless, &info, &err), FL_E_UNSUPPORTED, &err);
    EXPECT(strstr(err.msg, "lossless") != NULL);
    free(pix);
    free(g);
    return fl_check_status();
}
