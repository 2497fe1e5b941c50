/* test_jpeg_pairs.c — restart intervals decoded two at a time (jpeg_entropy.c's decode_pair, used
 * for intervals of up to 16 MCUs, a pair possibly straddling two MCU rows) give libjpeg's pixels.
 * Files of odd sizes, gray / 4:4:4 / 4:2:2 / 4:2:0 / 4:4:0, with restart intervals of 1-4 MCUs
 * (fl_jpeg_add_restarts, a divisor of the MCU row; libjpeg's own, which may span rows), decoded
 * in full and through crops at every edge, the corners, 1-pixel crops, the whole image and random
 * ones: equal byte for byte to libjpeg decoding the whole original file (FL_DECODE_LIBJPEG_HUFFMAN
 * with FL_DECODE_NO_RESTART_SKIP). Damaged copies (bytes changed, truncated, restart markers
 * renumbered) never crash, and whatever fastload decodes without an error libjpeg, reading the
 * same restart intervals, decodes to the same pixels. The 16-byte marker scan both the restart cut
 * and the Huffman decoder's copy rely on (fl_jpeg_next_marker) agrees with a byte-by-byte scan
 * on buffers dense in 0xFF, stuffed zeros and markers, from every start, at every length. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "fl_check.h"
#include "pattern_jpeg.h"
#include "fl_error.h"
#include "fl_image.h"
#include "image_internal.h"

/* A JPEG of the noisy pattern with edges (pattern_jpeg.h); restart: MCUs per interval. */
static uint8_t *make_jpeg(uint32_t w, uint32_t h, int comps, int hs, int vs, unsigned restart,
                          unsigned long *len, uint32_t seed)
{
    pattern_jpeg o = {.w = w,
                      .h = h,
                      .comps = comps,
                      .hs = hs,
                      .vs = vs,
                      .quality = 90,
                      .restart = restart,
                      .noise_shift = 26,
                      .noise_bias = 32,
                      .tile_w = 13,
                      .tile_h = 11,
                      .seed = seed};
    return make_pattern_jpeg(&o, len);
}

static fl_decoder *ours, *cut, *whole; /* fastload; libjpeg on the cut stream; on the file */
static fl_error err;
static uint32_t rng = 777;
static uint32_t rnd(uint32_t n)
{
    rng = rng * 1664525u + 1013904223u;
    return n ? (rng >> 8) % n : 0;
}

static int same_image(const fl_image *a, const fl_image *b, uint32_t ch)
{
    if (a->width != b->width || a->height != b->height)
        return 0;
    for (uint32_t y = 0; y < a->height; y++)
        if (memcmp(a->pixels + y * a->stride, b->pixels + y * b->stride, (size_t)a->width * ch))
            return 0;
    return 1;
}

/* One crop through fastload and the reference; intact: both must succeed and agree, damaged:
 * fastload's success implies the reference's (libjpeg on the same cut stream) and agreement. */
static void crop_one(const uint8_t *f, size_t len, fl_rect r, uint32_t os, uint32_t ch, int flip,
                     int intact, const char *what)
{
    static uint8_t o1[64 * 64 * 3], o2[64 * 64 * 3];
    fl_decoder *ref = intact ? whole : cut;
    int ra = fl_decode_crop_resize(ours, f, len, &r, os, os, ch, flip, o1, &err);
    int rb = fl_decode_crop_resize(ref, f, len, &r, os, os, ch, flip, o2, &err);
    if (intact)
        EXPECTF(ra == 0 && rb == 0, "%s crop %ux%u+%u+%u: rc %d / %d: %s", what, r.width, r.height,
                r.x, r.y, ra, rb, err.msg);
    else
        EXPECTF(ra != 0 || rb == 0, "%s crop %ux%u+%u+%u: only libjpeg refuses: %s", what, r.width,
                r.height, r.x, r.y, err.msg);
    if (ra || rb)
        return;
    EXPECTF(!memcmp(o1, o2, (size_t)os * os * ch), "%s crop %ux%u+%u+%u -> %u ch %u: pixels differ",
            what, r.width, r.height, r.x, r.y, os, ch);
}

static void check_file(const uint8_t *f, size_t len, uint32_t w, uint32_t h, int intact,
                       const char *what)
{
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        fl_image a, b;
        int ra = fl_decode(ours, f, len, ch, 0, 0, &a, &err);
        int rb = fl_decode(intact ? whole : cut, f, len, ch, 0, 0, &b, &err);
        if (intact)
            EXPECTF(ra == 0 && rb == 0, "%s full ch %u: rc %d / %d: %s", what, ch, ra, rb, err.msg);
        else
            EXPECTF(ra != 0 || rb == 0, "%s full ch %u: only libjpeg refuses: %s", what, ch,
                    err.msg);
        if (!ra && !rb)
            EXPECTF(same_image(&a, &b, ch), "%s full ch %u: pixels differ", what, ch);
    }
    /* edges and corners, thin and 1-pixel crops, the whole image, then random ones */
    uint32_t cw = w > 3 ? w / 3 : 1, chh = h > 3 ? h / 3 : 1;
    fl_rect fixed[] = {{0, 0, w, h},         {0, 0, cw, chh},      {w - cw, h - chh, cw, chh},
                       {w - cw, 0, cw, h},   {0, h - chh, w, chh}, {w - 1, h - 1, 1, 1},
                       {w / 2, h / 2, 1, 1}, {0, h / 2, w, 1},     {w / 2, 0, 1, h}};
    int n = intact ? 16 : 4;
    for (int t = 0; t < n; t++) {
        fl_rect r;
        if (t < (int)(sizeof fixed / sizeof *fixed) && (intact || t < 2)) {
            r = fixed[t];
        } else {
            r.width = 1 + rnd(w);
            r.height = 1 + rnd(h);
            r.x = rnd(w - r.width + 1);
            r.y = rnd(h - r.height + 1);
        }
        crop_one(f, len, r, 8 + rnd(57), t & 1 ? 3 : 1, t & 2, intact, what);
    }
}

/* fl_jpeg_next_marker against the byte loop it replaces, on buffers of 0x00 / 0xFF / 0xD0 / 0x12
 * bytes (runs of fill, stuffed zeros, markers, a trailing 0xFF) of 0-80 bytes. */
static void check_marker_scan(void)
{
    static uint8_t buf[80];
    static const uint8_t alphabet[4] = {0x00, 0xFF, 0xD0, 0x12};
    for (int t = 0; t < 4000; t++) {
        size_t len = rnd(81);
        for (size_t i = 0; i < len; i++)
            buf[i] = alphabet[rnd(t & 1 ? 4 : 2)];
        for (size_t p = 0; p <= len; p++) {
            size_t want = len;
            for (size_t i = p; i < len; i++)
                if (buf[i] == 0xFF && (i + 1 == len || buf[i + 1] != 0x00)) {
                    want = i;
                    break;
                }
            size_t got = fl_jpeg_next_marker(buf, p, len);
            EXPECTF(got == want, "marker scan of %zu bytes from %zu: %zu, want %zu", len, p, got,
                    want);
            if (got != want)
                return;
        }
    }
}

int main(void)
{
    check_marker_scan();
    fl_encoder *enc;
    CHECK_OK(fl_encoder_create(&enc, &err), &err);
    CHECK_OK(fl_decoder_create(0, &ours, &err), &err);
    CHECK_OK(fl_decoder_create(0, &cut, &err), &err);
    CHECK_OK(fl_decoder_create(0, &whole, &err), &err);
    fl_decoder_set_flags(cut, FL_DECODE_LIBJPEG_HUFFMAN);
    fl_decoder_set_flags(whole, FL_DECODE_LIBJPEG_HUFFMAN | FL_DECODE_NO_RESTART_SKIP);
    static const uint32_t sizes[][2] = {{1, 1},    {9, 7},    {17, 33}, {63, 65},
                                        {130, 97}, {257, 31}, {31, 150}};
    static const int samp[][3] = {{1, 1, 1}, {3, 1, 1}, {3, 2, 1}, {3, 2, 2}, {3, 1, 2}};
    char what[160];
    int files = 0, damaged = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t ss = 0; ss < sizeof samp / sizeof *samp; ss++)
            for (unsigned ri = 1; ri <= 4; ri++)
                for (int own = 0; own <= 1; own++) {
                    uint32_t w = sizes[si][0], h = sizes[si][1];
                    unsigned long slen;
                    uint8_t *src = make_jpeg(w, h, samp[ss][0], samp[ss][1], samp[ss][2],
                                             own ? ri : 0, &slen, (uint32_t)(si * 7 + ss * 3 + ri));
                    uint8_t *f = src;
                    size_t len = slen;
                    if (!own) { /* the packer's rewrite: a divisor of the MCU row up to ri */
                        const uint8_t *out;
                        size_t out_len;
                        CHECK_OK(fl_jpeg_add_restarts(enc, src, slen, ri, &out, &out_len, &err),
                                 &err);
                        f = malloc(out_len);
                        memcpy(f, out, out_len);
                        len = out_len;
                    }
                    snprintf(what, sizeof what, "%ux%u samp %zu %s restarts %u", w, h, ss,
                             own ? "libjpeg" : "add_restarts", ri);
                    check_file(f, len, w, h, 1, what);
                    files++;
                    size_t es = entropy_start(f, len);
                    for (int t = 0; es && w >= 17 && t < 8; t++) {
                        uint8_t *bad = malloc(len);
                        memcpy(bad, f, len);
                        size_t blen = len;
                        if (t < 2) {
                            blen = es + (len - es) * (size_t)(t + 1) / 3;
                        } else if (t < 6) {
                            bad[es + rnd((uint32_t)(len - es - 2))] ^= (uint8_t)(1 + rnd(255));
                        } else {
                            size_t k = 0, want = 1 + rnd(4);
                            for (size_t i = es; i + 1 < len; i++)
                                if (bad[i] == 0xFF && bad[i + 1] >= 0xD0 && bad[i + 1] <= 0xD7 &&
                                    ++k == want) {
                                    bad[i + 1] =
                                        t == 6 ? (uint8_t)(0xD0 + ((bad[i + 1] + 5) & 7)) : 0x00;
                                    break;
                                }
                        }
                        snprintf(what, sizeof what, "%ux%u samp %zu %s restarts %u damage %d", w, h,
                                 ss, own ? "libjpeg" : "add_restarts", ri, t);
                        check_file(bad, blen, w, h, 0, what);
                        damaged++;
                        free(bad);
                    }
                    if (f != src)
                        free(f);
                    free(src);
                }
    printf("%d files identical to libjpeg's full decode, %d damaged ones\n", files, damaged);
    fl_decoder_free(ours);
    fl_decoder_free(cut);
    fl_decoder_free(whole);
    fl_encoder_free(enc);
    return fl_check_status();
}
