/* test_mask_codec.c — fl_mask_encode / fl_mask_decode / fl_mask_resize_nearest: uint8 and uint16
 * masks round-trip exactly through PNG and zstd; a palette PNG gives its indices (VOC), a 4-bit
 * gray PNG its values; RGB, a size mismatch, truncation, a uint16 value into uint8 and a short
 * zstd frame are refused with a message; the nearest-neighbour resample invents no values. */
#include <png.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fl_check.h"
#include "fl_error.h"
#include "fl_image.h"

/* A PNG of `ctype`/`depth` written with libpng from packed rows (for inputs the encoder never
 * makes: palette, 4-bit gray, RGB). */
struct mem {
    uint8_t *p;
    size_t n, cap;
};
static void wr(png_structp png, png_bytep d, png_size_t n)
{
    struct mem *m = png_get_io_ptr(png);
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2;
        m->p = realloc(m->p, m->cap);
    }
    memcpy(m->p + m->n, d, n);
    m->n += n;
}
static void fl(png_structp png) { (void)png; }

static struct mem make_png(uint32_t w, uint32_t h, int ctype, int depth, const uint8_t *rows,
                           size_t rowbytes)
{
    struct mem m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png)))
        abort();
    png_set_write_fn(png, &m, wr, fl);
    png_set_IHDR(png, info, w, h, depth, ctype, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (ctype == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[256];
        for (int i = 0; i < 256; i++)
            pal[i] = (png_color){(png_byte)(i * 7), (png_byte)(i * 13), (png_byte)(255 - i)};
        png_set_PLTE(png, info, pal, 256);
    }
    png_write_info(png, info);
    for (uint32_t y = 0; y < h; y++)
        png_write_row(png, rows + y * rowbytes);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return m;
}

int main(void)
{
    fl_error err;
    const uint32_t W = 37, H = 23;
    uint8_t m8[W * H], d8[W * H];
    uint16_t m16[W * H], d16[W * H];
    for (uint32_t i = 0; i < W * H; i++) {
        m8[i] = (uint8_t)((i * 31 + i / W) % 256);
        m16[i] = (uint16_t)(i * 977 % 65536);
    }
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    /* round trips */
    fl_mask_codec codecs[2] = {FL_MASK_PNG, FL_MASK_ZSTD};
    for (int c = 0; c < 2; c++) {
        CHECK_OK(fl_mask_encode(m8, W, H, FL_DTYPE_U8, codecs[c], 0, &buf, &cap, &len, &err), &err);
        memset(d8, 0xAA, sizeof d8);
        CHECK_OK(fl_mask_decode(buf, len, codecs[c], W, H, FL_DTYPE_U8, d8, sizeof d8, "m8", &err),
                 &err);
        EXPECTF(!memcmp(m8, d8, sizeof d8), "uint8 round trip codec %d", codecs[c]);
        CHECK_OK(fl_mask_encode(m16, W, H, FL_DTYPE_U16, codecs[c], 0, &buf, &cap, &len, &err),
                 &err);
        memset(d16, 0xAA, sizeof d16);
        CHECK_OK(
            fl_mask_decode(buf, len, codecs[c], W, H, FL_DTYPE_U16, d16, sizeof d16, "m16", &err),
            &err);
        EXPECTF(!memcmp(m16, d16, sizeof d16), "uint16 round trip codec %d", codecs[c]);
        /* wrong size */
        EXPECT_RC(fl_mask_decode(buf, len, codecs[c], W + 1, H, FL_DTYPE_U16, d16, sizeof d16 * 2,
                                 "m16", &err),
                  FL_E_FORMAT, &err);
        EXPECTF(c == 1 || strstr(err.msg, "mask is 37x23, its image is 38x23"), "size message: %s",
                err.msg);
        /* truncated */
        int r = fl_mask_decode(buf, len / 2, codecs[c], W, H, FL_DTYPE_U16, d16, sizeof d16, "m16",
                               &err);
        EXPECTF(r == FL_E_DECODE || r == FL_E_FORMAT, "truncated codec %d: %d", codecs[c], r);
    }
    /* PNG 16-bit values into uint8: fits when small, refused when not */
    CHECK_OK(fl_mask_encode(m16, W, H, FL_DTYPE_U16, FL_MASK_PNG, 0, &buf, &cap, &len, &err), &err);
    EXPECT_RC(fl_mask_decode(buf, len, FL_MASK_PNG, W, H, FL_DTYPE_U8, d8, sizeof d8, "big", &err),
              FL_E_FORMAT, &err);
    EXPECTF(strstr(err.msg, "does not fit uint8") != NULL, "message: %s", err.msg);
    uint16_t small[W * H];
    for (uint32_t i = 0; i < W * H; i++)
        small[i] = m8[i];
    CHECK_OK(fl_mask_encode(small, W, H, FL_DTYPE_U16, FL_MASK_PNG, 0, &buf, &cap, &len, &err),
             &err);
    CHECK_OK(fl_mask_decode(buf, len, FL_MASK_PNG, W, H, FL_DTYPE_U8, d8, sizeof d8, "small", &err),
             &err);
    EXPECTF(!memcmp(d8, m8, sizeof d8), "16-bit PNG of small values into uint8");
    /* 8-bit PNG into uint16 */
    CHECK_OK(fl_mask_encode(m8, W, H, FL_DTYPE_U8, FL_MASK_PNG, 0, &buf, &cap, &len, &err), &err);
    CHECK_OK(
        fl_mask_decode(buf, len, FL_MASK_PNG, W, H, FL_DTYPE_U16, d16, sizeof d16, "widen", &err),
        &err);
    int same = 1;
    for (uint32_t i = 0; i < W * H; i++)
        same &= d16[i] == m8[i];
    EXPECTF(same, "8-bit PNG into uint16");

    /* palette PNG (VOC): indices, not colours */
    struct mem p = make_png(W, H, PNG_COLOR_TYPE_PALETTE, 8, m8, W);
    CHECK_OK(fl_mask_decode(p.p, p.n, FL_MASK_PNG, W, H, FL_DTYPE_U8, d8, sizeof d8, "pal", &err),
             &err);
    EXPECTF(!memcmp(d8, m8, sizeof d8), "palette PNG gives its indices");
    free(p.p);
    /* 4-bit gray: values 0..15, not scaled */
    uint8_t packed[H * ((W + 1) / 2)], want4[W * H];
    memset(packed, 0, sizeof packed);
    for (uint32_t y = 0; y < H; y++)
        for (uint32_t x = 0; x < W; x++) {
            uint8_t v = (uint8_t)((x + y) % 16);
            want4[y * W + x] = v;
            packed[y * ((W + 1) / 2) + x / 2] |= (uint8_t)(x % 2 ? v : v << 4);
        }
    p = make_png(W, H, PNG_COLOR_TYPE_GRAY, 4, packed, (W + 1) / 2);
    CHECK_OK(fl_mask_decode(p.p, p.n, FL_MASK_PNG, W, H, FL_DTYPE_U8, d8, sizeof d8, "g4", &err),
             &err);
    EXPECTF(!memcmp(d8, want4, sizeof d8), "4-bit gray PNG gives its values");
    free(p.p);
    /* RGB refused */
    uint8_t rgb[W * H * 3];
    memset(rgb, 9, sizeof rgb);
    p = make_png(W, H, PNG_COLOR_TYPE_RGB, 8, rgb, W * 3);
    EXPECT_RC(
        fl_mask_decode(p.p, p.n, FL_MASK_PNG, W, H, FL_DTYPE_U8, d8, sizeof d8, "x.png", &err),
        FL_E_FORMAT, &err);
    EXPECTF(strstr(err.msg, "x.png: an RGB PNG") != NULL, "RGB message: %s", err.msg);
    uint32_t pw, ph, pb;
    CHECK_OK(fl_mask_probe(p.p, p.n, FL_MASK_PNG, &pw, &ph, &pb, &err), &err);
    EXPECTF(pw == W && ph == H && pb == 8, "probe %ux%u %u bits", pw, ph, pb);
    free(p.p);
    /* not a PNG, short room */
    EXPECT_RC(fl_mask_decode((const uint8_t *)"hello world, no png here at all!!", 33, FL_MASK_PNG,
                             W, H, FL_DTYPE_U8, d8, sizeof d8, "junk", &err),
              FL_E_DECODE, &err);
    EXPECT_RC(fl_mask_decode(buf, len, FL_MASK_PNG, W, H, FL_DTYPE_U8, d8, 10, "room", &err),
              FL_E_INVALID, &err);

    /* nearest-neighbour resample: values only from the source, exact at integer factors */
    uint8_t big[W * 3 * H * 3], back[W * H];
    fl_mask_resize_nearest(m8, W, H, big, W * 3, H * 3, 1);
    fl_mask_resize_nearest(big, W * 3, H * 3, back, W, H, 1);
    EXPECTF(!memcmp(back, m8, sizeof back), "x3 up then down gives the source back");
    uint16_t r16[11 * 7];
    fl_mask_resize_nearest(m16, W, H, r16, 11, 7, 2);
    int ok = 1;
    for (uint32_t i = 0; i < 11 * 7; i++) {
        int found = 0;
        for (uint32_t j = 0; j < W * H && !found; j++)
            found = r16[i] == m16[j];
        ok &= found;
    }
    EXPECTF(ok, "resized uint16 mask holds only source values");
    free(buf);
    return fl_check_status();
}
