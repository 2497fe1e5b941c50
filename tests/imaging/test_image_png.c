/* test_image_png.c — PNG: fl_encode_png → fl_decode exact round trip (1 and 3 channels, padded
 * stride), 16-bit, palette (with tRNS), RGBA and gray+alpha, gray↔RGB conversion, interlaced. Bad
 * data and size limits: test_image_png_bad. */
#include "img_test.h"

int main(void)
{
    fl_error err;
    fl_decoder *d;
    fl_encoder *e;
    fl_image img;
    const uint8_t *enc;
    size_t enc_len, len;
    EXPECT_RC(fl_decoder_create(0, &d, &err), 0, &err);
    EXPECT_RC(fl_encoder_create(&e, &err), 0, &err);

    /* Exact round trips, including a stride wider than the row. */
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        uint32_t w = 53, h = 31;
        uint8_t *pix = synth_image(w, h, ch);
        size_t stride = (size_t)w * ch + 5;
        uint8_t *padded = calloc(stride * h, 1);
        for (uint32_t y = 0; y < h; y++)
            memcpy(padded + y * stride, pix + (size_t)y * w * ch, (size_t)w * ch);
        fl_image src = {padded, w, h, ch, stride};
        EXPECT_RC(fl_encode_png(e, &src, &enc, &enc_len, &err), 0, &err);
        EXPECT_RC(fl_decode(d, enc, enc_len, ch, 0, 0, &img, &err), 0, &err);
        EXPECT(img.width == w && img.height == h && img.channels == ch &&
               img.stride == (size_t)w * ch);
        EXPECT(memcmp(img.pixels, pix, (size_t)w * h * ch) == 0);
        /* The decoder's buffer is reused for a same-size image. */
        const uint8_t *first = img.pixels;
        EXPECT_RC(fl_decode(d, enc, enc_len, ch, 0, 0, &img, &err), 0, &err);
        EXPECT(img.pixels == first);
        /* gray → RGB replicates; RGB → gray uses 0.299/0.587/0.114. */
        uint32_t other = ch == 1 ? 3 : 1;
        EXPECT_RC(fl_decode(d, enc, enc_len, other, 0, 0, &img, &err), 0, &err);
        EXPECT(img.channels == other);
        if (ch == 1) {
            EXPECT(img.pixels[0] == pix[0] && img.pixels[1] == pix[0] && img.pixels[2] == pix[0]);
            EXPECT(img.pixels[3 * 100 + 2] == pix[100]);
        } else {
            int want = (int)((19595u * pix[0] + 38470u * pix[1] + 7471u * pix[2] + 32768u) >> 16);
            EXPECT(img.pixels[0] == want);
        }
        free(pix);
        free(padded);
    }

    /* 16-bit RGB: the high byte is kept. */
    {
        uint32_t w = 20, h = 10;
        uint8_t *p16 = malloc((size_t)w * h * 6);
        for (size_t i = 0; i < (size_t)w * h * 3; i++) {
            uint16_t v = (uint16_t)(i * 977 + 13);
            p16[2 * i] = (uint8_t)(v >> 8);
            p16[2 * i + 1] = (uint8_t)v;
        }
        uint8_t *f = write_png(p16, w * 6, w, h, 16, PNG_COLOR_TYPE_RGB, NULL, 0, NULL, 0, 0, &len);
        EXPECT_RC(fl_decode(d, f, len, 3, 0, 0, &img, &err), 0, &err);
        int ok = 1;
        for (size_t i = 0; i < (size_t)w * h * 3; i++)
            ok &= img.pixels[i] == p16[2 * i];
        EXPECT(ok);
        free(f);
        free(p16);
    }

    /* Palette with tRNS (expands to RGBA, alpha dropped), 4-bit indices. */
    {
        png_color pal[16];
        uint8_t trns[16];
        for (int i = 0; i < 16; i++) {
            pal[i].red = (png_byte)(i * 16);
            pal[i].green = (png_byte)(255 - i * 7);
            pal[i].blue = (png_byte)(i * 3);
            trns[i] = (uint8_t)(i * 10);
        }
        uint32_t w = 9, h = 5; /* odd width: packed 4-bit rows */
        size_t stride = (w + 1) / 2;
        uint8_t *idx = calloc(stride * h, 1);
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < w; x++) {
                uint8_t v = (uint8_t)((x + 3 * y) % 16);
                idx[y * stride + x / 2] |= (uint8_t)(x % 2 ? v : v << 4);
            }
        uint8_t *f =
            write_png(idx, stride, w, h, 4, PNG_COLOR_TYPE_PALETTE, pal, 16, trns, 16, 0, &len);
        EXPECT_RC(fl_decode(d, f, len, 3, 0, 0, &img, &err), 0, &err);
        int ok = img.width == w && img.height == h;
        for (uint32_t y = 0; y < h && ok; y++)
            for (uint32_t x = 0; x < w; x++) {
                int v = (x + 3 * y) % 16;
                const uint8_t *px = img.pixels + (y * w + x) * 3;
                ok &= px[0] == pal[v].red && px[1] == pal[v].green && px[2] == pal[v].blue;
            }
        EXPECT(ok);
        free(f);
        free(idx);
    }

    /* RGBA and gray+alpha: alpha stripped, colour kept; interlaced too. */
    {
        uint32_t w = 17, h = 13;
        uint8_t *rgba = malloc((size_t)w * h * 4), *ga = malloc((size_t)w * h * 2);
        for (size_t i = 0; i < (size_t)w * h; i++) {
            for (int c = 0; c < 4; c++)
                rgba[4 * i + c] = (uint8_t)(i * 5 + c * 50);
            ga[2 * i] = (uint8_t)(i * 3);
            ga[2 * i + 1] = (uint8_t)(255 - i);
        }
        for (int il = 0; il < 2; il++) {
            uint8_t *f =
                write_png(rgba, w * 4, w, h, 8, PNG_COLOR_TYPE_RGBA, NULL, 0, NULL, 0, il, &len);
            EXPECT_RC(fl_decode(d, f, len, 3, 0, 0, &img, &err), 0, &err);
            int ok = 1;
            for (size_t i = 0; i < (size_t)w * h; i++)
                for (int c = 0; c < 3; c++)
                    ok &= img.pixels[3 * i + c] == rgba[4 * i + c];
            EXPECT(ok);
            free(f);
            f = write_png(ga, w * 2, w, h, 8, PNG_COLOR_TYPE_GRAY_ALPHA, NULL, 0, NULL, 0, il,
                          &len);
            EXPECT_RC(fl_decode(d, f, len, 1, 0, 0, &img, &err), 0, &err);
            ok = 1;
            for (size_t i = 0; i < (size_t)w * h; i++)
                ok &= img.pixels[i] == ga[2 * i];
            EXPECT(ok);
            free(f);
        }
        free(rgba);
        free(ga);
    }

    fl_encoder_free(e);
    fl_decoder_free(d);
    return fl_check_status();
}
