/* test_image_webp.c — WebP through libwebp: probe of the three first-chunk kinds (VP8, VP8L,
 * VP8X; animated refused as unsupported), full decode (lossless: exact pixels; 1 channel: the
 * RGB decode's luma), crop decode equal to "decode, then resample the window" byte for byte,
 * truncated and over-limit files refused, a header whose size disagrees with the frame refused by
 * the crop path. Images are made with libwebp's encoder. Built without libwebp, it checks that
 * WebP is probed but refused as unsupported. */
#include "img_test.h"

#include "fl_error.h"

#ifdef FL_HAVE_WEBP
#include <webp/encode.h>
#endif

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16),
    p[3] = (uint8_t)(v >> 24);
}

/* A RIFF/WEBP container around one chunk header (payload left zero): probe-only input. */
static size_t fake_webp(uint8_t *b, const char *fourcc, const uint8_t *head, size_t hn)
{
    memset(b, 0, 64);
    memcpy(b, "RIFF", 4);
    put_le32(b + 4, 56);
    memcpy(b + 8, "WEBP", 4);
    memcpy(b + 12, fourcc, 4);
    put_le32(b + 16, 44);
    memcpy(b + 20, head, hn);
    return 64;
}

static void test_probe(void)
{
    fl_error err;
    fl_image_info info;
    uint8_t b[64];
    /* VP8 key frame 300x200 (14-bit sizes, scale bits set: ignored) */
    const uint8_t vp8[10] = {0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x2C, 0x41, 0xC8, 0x80};
    EXPECT_RC(fl_image_probe(b, fake_webp(b, "VP8 ", vp8, 10), &info, &err), 0, &err);
    EXPECT(info.format == FL_IMG_WEBP && info.width == 300 && info.height == 200 &&
           info.components == 3);
    /* VP8L 5x7 with alpha: 14 bits width-1, 14 bits height-1, alpha bit, version 0 */
    uint32_t bits = 4u | 6u << 14 | 1u << 28;
    uint8_t vp8l[5] = {0x2F, (uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16),
                       (uint8_t)(bits >> 24)};
    EXPECT_RC(fl_image_probe(b, fake_webp(b, "VP8L", vp8l, 5), &info, &err), 0, &err);
    EXPECT(info.format == FL_IMG_WEBP && info.width == 5 && info.height == 7 &&
           info.components == 4);
    /* VP8X canvas 1000x2 */
    const uint8_t vp8x[10] = {0x10, 0, 0, 0, 0xE7, 0x03, 0x00, 0x01, 0x00, 0x00};
    EXPECT_RC(fl_image_probe(b, fake_webp(b, "VP8X", vp8x, 10), &info, &err), 0, &err);
    EXPECT(info.width == 1000 && info.height == 2 && info.components == 4);
    /* animated: recognised, refused as unsupported */
    const uint8_t anim[10] = {0x02, 0, 0, 0, 9, 0, 0, 9, 0, 0};
    EXPECT_RC(fl_image_probe(b, fake_webp(b, "VP8X", anim, 10), &info, &err), FL_E_UNSUPPORTED,
              &err);
    EXPECT(strstr(err.msg, "animated") != NULL);
    /* malformed: bad start code, bad signature, unknown chunk, truncated, zero size */
    uint8_t bad[10];
    memcpy(bad, vp8, 10);
    bad[4] = 0;
    EXPECT_RC(fl_image_probe(b, fake_webp(b, "VP8 ", bad, 10), &info, &err), FL_E_DECODE, &err);
    vp8l[0] = 0x2E;
    EXPECT_RC(fl_image_probe(b, fake_webp(b, "VP8L", vp8l, 5), &info, &err), FL_E_DECODE, &err);
    EXPECT_RC(fl_image_probe(b, fake_webp(b, "ALPH", vp8, 10), &info, &err), FL_E_DECODE, &err);
    fake_webp(b, "VP8 ", vp8, 10);
    for (size_t n = 12; n < 30; n++)
        EXPECT(fl_image_probe(b, n, &info, &err) != 0);
    const uint8_t zero[10] = {0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x00, 0x00, 0xC8, 0x00};
    EXPECT_RC(fl_image_probe(b, fake_webp(b, "VP8 ", zero, 10), &info, &err), FL_E_DECODE, &err);
    /* completeness: the RIFF size against the length */
    EXPECT(fl_image_looks_complete(FL_IMG_WEBP, b, 64) == 1);
    EXPECT(fl_image_looks_complete(FL_IMG_WEBP, b, 63) == 0);
}

#ifdef FL_HAVE_WEBP
/* RGB -> gray with the decoder's fixed-point BT.601 weights (imaging/decoder.c). */
static void rgb_to_gray_ref(const uint8_t *src, uint8_t *dst, size_t npix)
{
    for (size_t i = 0; i < npix; i++)
        dst[i] = (uint8_t)((19595u * src[3 * i] + 38470u * src[3 * i + 1] + 7471u * src[3 * i + 2] +
                            32768u) >>
                           16);
}

static void test_decode(void)
{
    const uint32_t W = 61, H = 37;
    uint8_t *rgb = malloc((size_t)W * H * 3);
    for (uint32_t y = 0; y < H; y++)
        for (uint32_t x = 0; x < W; x++)
            for (uint32_t c = 0; c < 3; c++)
                rgb[(y * W + x) * 3 + c] = (uint8_t)(x * 7 + y * 13 + c * 70 + (x * y) % 11);
    uint8_t *lossless = NULL, *lossy = NULL;
    size_t nl = WebPEncodeLosslessRGB(rgb, (int)W, (int)H, (int)W * 3, &lossless);
    size_t ny = WebPEncodeRGB(rgb, (int)W, (int)H, (int)W * 3, 80.f, &lossy);
    EXPECT(nl > 0 && ny > 0);
    EXPECT(fl_image_can_decode(FL_IMG_WEBP) == 1);
    fl_decoder *d;
    fl_error err;
    EXPECT_RC(fl_decoder_create(0, &d, &err), 0, &err);
    fl_image img;
    /* lossless: exact */
    EXPECT_RC(fl_decode(d, lossless, nl, 3, 0, 0, &img, &err), 0, &err);
    EXPECT(img.width == W && img.height == H && img.channels == 3);
    int same = 1;
    for (uint32_t y = 0; y < H; y++)
        if (memcmp(img.pixels + y * img.stride, rgb + (size_t)y * W * 3, (size_t)W * 3))
            same = 0;
    EXPECT(same);
    /* gray: the luma of the RGB decode */
    uint8_t *gray = malloc((size_t)W * H);
    rgb_to_gray_ref(rgb, gray, (size_t)W * H);
    EXPECT_RC(fl_decode(d, lossless, nl, 1, 0, 0, &img, &err), 0, &err);
    EXPECT(img.channels == 1 && img.stride == W && !memcmp(img.pixels, gray, (size_t)W * H));
    /* lossy: decodes, crop = decode + resample of the window, bit for bit */
    EXPECT_RC(fl_decode(d, lossy, ny, 3, 0, 0, &img, &err), 0, &err);
    uint8_t *full = malloc((size_t)W * H * 3);
    for (uint32_t y = 0; y < H; y++)
        memcpy(full + (size_t)y * W * 3, img.pixels + y * img.stride, (size_t)W * 3);
    fl_rect r = {5, 3, 40, 30};
    uint8_t out[24 * 16 * 3], ref[24 * 16 * 3];
    for (int flip = 0; flip < 2; flip++) {
        EXPECT_RC(fl_decode_crop_resize(d, lossy, ny, &r, 24, 16, 3, flip, out, &err), 0, &err);
        EXPECT_RC(fl_resize(full + (r.y * W + r.x) * 3, r.width, r.height, (size_t)W * 3, 3, ref,
                            24, 16, 24 * 3, flip, NULL, 0, &err),
                  0, &err);
        EXPECT(!memcmp(out, ref, sizeof out));
    }
    /* truncated: every prefix fails cleanly */
    for (size_t n = 0; n < ny; n += ny / 17 + 1)
        EXPECT(fl_decode(d, lossy, n, 3, 0, 0, &img, &err) != 0);
    EXPECT(fl_image_looks_complete(FL_IMG_WEBP, lossy, ny) == 1);
    EXPECT(fl_image_looks_complete(FL_IMG_WEBP, lossy, ny - 1) == 0);
    /* over the decoder's pixel limit */
    fl_decoder *small;
    EXPECT_RC(fl_decoder_create(100, &small, &err), 0, &err);
    EXPECT_RC(fl_decode(small, lossy, ny, 3, 0, 0, &img, &err), FL_E_TOO_LARGE, &err);
    fl_decoder_free(small);
    /* a VP8L header claiming another size than the frame: the crop path must refuse it (the
     * crop was checked against the header) — patch the 14-bit width field */
    uint8_t *liar = malloc(nl);
    memcpy(liar, lossless, nl);
    EXPECT(!memcmp(liar + 12, "VP8L", 4));
    uint32_t b = (uint32_t)liar[21] | (uint32_t)liar[22] << 8 | (uint32_t)liar[23] << 16 |
                 (uint32_t)liar[24] << 24;
    b = (b & ~0x3FFFu) | (W * 2 - 1);
    liar[21] = (uint8_t)b, liar[22] = (uint8_t)(b >> 8), liar[23] = (uint8_t)(b >> 16),
    liar[24] = (uint8_t)(b >> 24);
    fl_rect wide = {W + 10, 0, W - 20, H};
    EXPECT(fl_decode_crop_resize(d, liar, nl, &wide, 8, 8, 3, 0, out, &err) != 0);
    free(liar);
    fl_decoder_free(d);
    WebPFree(lossless);
    WebPFree(lossy);
    free(rgb);
    free(gray);
    free(full);
}
#endif

int main(void)
{
    test_probe();
#ifdef FL_HAVE_WEBP
    test_decode();
#else
    /* no libwebp in this build: probed, never decoded */
    EXPECT(fl_image_can_decode(FL_IMG_WEBP) == 0);
    uint8_t b[64];
    const uint8_t vp8[10] = {0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x2C, 0x41, 0xC8, 0x80};
    fl_decoder *d;
    fl_error err;
    fl_image img;
    EXPECT_RC(fl_decoder_create(0, &d, &err), 0, &err);
    EXPECT_RC(fl_decode(d, b, fake_webp(b, "VP8 ", vp8, 10), 3, 0, 0, &img, &err), FL_E_UNSUPPORTED,
              &err);
    EXPECT(strstr(err.msg, "libwebp") != NULL);
    fl_decoder_free(d);
#endif
    return fl_check_status();
}
