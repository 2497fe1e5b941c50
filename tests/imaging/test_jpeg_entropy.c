/* test_jpeg_entropy.c — fastload's Huffman decoder (jpeg_entropy.c) gives libjpeg's pixels: every
 * JPEG kind libjpeg writes (sizes 1x1 to odd sizes with partial MCUs, gray, 4:2:0 / 4:2:2 / 4:4:0 /
 * 4:4:4, qualities 30-100, standard and optimized tables, restart markers per row, per 1-3 MCUs
 * and as fl_jpeg_add_restarts writes them) decodes byte-identically with it and with libjpeg's own
 * decoder (FL_DECODE_LIBJPEG_HUFFMAN), full size, DCT-scaled and through random crops. Damaged
 * files (truncated, bytes changed, restart markers out of sequence or missing) never crash, and
 * whatever fastload decodes without an error libjpeg decodes to the same pixels. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "fl_check.h"
#include "pattern_jpeg.h"
#include "fl_error.h"
#include "fl_image.h"

/* A JPEG of the noisy pattern with edges (pattern_jpeg.h); restart: MCUs per interval. */
static uint8_t *make_jpeg(uint32_t w, uint32_t h, int comps, int hs, int vs, int quality,
                          int optimize, unsigned restart, unsigned long *len, uint32_t seed)
{
    pattern_jpeg o = {.w = w,
                      .h = h,
                      .comps = comps,
                      .hs = hs,
                      .vs = vs,
                      .quality = quality,
                      .optimize = optimize,
                      .restart = restart,
                      .noise_shift = 27,
                      .noise_bias = 16,
                      .tile_w = 23,
                      .tile_h = 17,
                      .seed = seed};
    return make_pattern_jpeg(&o, len);
}

static fl_decoder *ours, *lib;
static fl_error err;
static uint32_t rng = 12345;
static uint32_t rnd(uint32_t n)
{
    rng = rng * 1664525u + 1013904223u;
    return n ? (rng >> 8) % n : 0;
}

/* Full decodes (every channel count, full size and scaled) and random crops: equal results. If
 * `strict`, both must succeed; otherwise (damaged input) fastload's success implies libjpeg's. */
static int compare(const uint8_t *f, size_t len, uint32_t w, uint32_t h, int strict,
                   const char *what)
{
    int fails = 0;
    static uint8_t o1[96 * 96 * 3], o2[96 * 96 * 3];
    for (uint32_t ch = 1; ch <= 3; ch += 2)
        for (uint32_t mw = 0; mw <= w / 2 + 1; mw += w / 2 + 1) {
            fl_image a, b;
            int ra = fl_decode(ours, f, len, ch, mw, 0, &a, &err);
            int rb = fl_decode(lib, f, len, ch, mw, 0, &b, &err);
            if (strict)
                EXPECTF(ra == 0 && rb == 0, "%s ch %u: rc %d / %d: %s", what, ch, ra, rb, err.msg);
            else
                EXPECTF(ra != 0 || rb == 0, "%s ch %u: only libjpeg refuses: %s", what, ch,
                        err.msg);
            if (ra || rb)
                continue;
            int same = a.width == b.width && a.height == b.height;
            for (uint32_t y = 0; same && y < a.height; y++)
                same =
                    !memcmp(a.pixels + y * a.stride, b.pixels + y * b.stride, (size_t)a.width * ch);
            EXPECTF(same, "%s ch %u min width %u: pixels differ", what, ch, mw);
            fails += !same;
        }
    for (int t = 0; t < (strict ? 6 : 2); t++) {
        fl_rect r = {0, 0, 1 + rnd(w), 1 + rnd(h)};
        r.x = rnd(w - r.width + 1);
        r.y = rnd(h - r.height + 1);
        uint32_t os = 8 + rnd(88), ch = t & 1 ? 3 : 1;
        int ra = fl_decode_crop_resize(ours, f, len, &r, os, os, ch, t & 2, o1, &err);
        int rb = fl_decode_crop_resize(lib, f, len, &r, os, os, ch, t & 2, o2, &err);
        if (strict)
            EXPECTF(ra == 0 && rb == 0, "%s crop: rc %d / %d: %s", what, ra, rb, err.msg);
        else
            EXPECTF(ra != 0 || rb == 0, "%s crop: only libjpeg refuses: %s", what, err.msg);
        if (ra || rb)
            continue;
        int same = !memcmp(o1, o2, (size_t)os * os * ch);
        EXPECTF(same, "%s crop %ux%u+%u+%u -> %u ch %u: pixels differ", what, r.width, r.height,
                r.x, r.y, os, ch);
        fails += !same;
    }
    return fails;
}

int main(void)
{
    fl_encoder *enc;
    CHECK_OK(fl_encoder_create(&enc, &err), &err);
    CHECK_OK(fl_decoder_create(0, &ours, &err), &err);
    CHECK_OK(fl_decoder_create(0, &lib, &err), &err);
    fl_decoder_set_flags(lib, FL_DECODE_LIBJPEG_HUFFMAN);
    static const uint32_t sizes[][2] = {{1, 1}, {8, 8}, {17, 9}, {64, 48}, {333, 211}, {31, 260}};
    static const int samp[][3] = {{3, 2, 2}, {3, 2, 1}, {3, 1, 2}, {3, 1, 1}, {1, 1, 1}};
    static const struct {
        int q, optimize;
        unsigned restart;
    } kinds[] = {{90, 0, 0}, {30, 0, 1}, {100, 1, 0}, {75, 1, 3}, {95, 0, 2}};
    char what[160];
    int files = 0, damaged = 0, refused = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t ss = 0; ss < sizeof samp / sizeof *samp; ss++)
            for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
                uint32_t w = sizes[si][0], h = sizes[si][1];
                unsigned long len;
                uint8_t *src = make_jpeg(w, h, samp[ss][0], samp[ss][1], samp[ss][2], kinds[k].q,
                                         kinds[k].optimize, kinds[k].restart, &len,
                                         (uint32_t)(si * 31 + ss * 7 + k));
                snprintf(what, sizeof what, "%ux%u samp %zu q%d opt %d rst %u", w, h, ss,
                         kinds[k].q, kinds[k].optimize, kinds[k].restart);
                compare(src, len, w, h, 1, what);
                files++;
                /* the restart rewrite the packer makes: per MCU and per row */
                for (uint32_t m = 0; m <= 1 && !kinds[k].restart; m++) {
                    const uint8_t *out;
                    size_t out_len;
                    if (fl_jpeg_add_restarts(enc, src, len, m ? 0 : 1, &out, &out_len, &err))
                        continue;
                    uint8_t *copy = malloc(out_len);
                    memcpy(copy, out, out_len);
                    snprintf(what, sizeof what, "%ux%u samp %zu q%d opt %d, add_restarts %u", w, h,
                             ss, kinds[k].q, kinds[k].optimize, m ? 0 : 1);
                    compare(copy, out_len, w, h, 1, what);
                    files++;
                    free(copy);
                }
                /* damage: truncations, changed bytes, and restart markers renumbered or removed */
                size_t es = entropy_start(src, len);
                if (es == 0 || w < 17)
                    goto next;
                for (int t = 0; t < 12; t++) {
                    uint8_t *bad = malloc(len);
                    memcpy(bad, src, len);
                    size_t blen = len;
                    if (t < 3) {
                        blen = es + (len - es) * (size_t)(t + 1) / 4;
                    } else if (t < 9) {
                        size_t at = es + rnd((uint32_t)(len - es - 2));
                        bad[at] ^= (uint8_t)(1 + rnd(255));
                    } else {
                        size_t n = 0;
                        for (size_t i = es; i + 1 < len; i++)
                            if (bad[i] == 0xFF && bad[i + 1] >= 0xD0 && bad[i + 1] <= 0xD7 &&
                                n++ == (size_t)t - 9) {
                                if (t == 11)
                                    bad[i + 1] = 0x00; /* the marker becomes stuffed data */
                                else
                                    bad[i + 1] = (uint8_t)(0xD0 + ((bad[i + 1] + 3) & 7));
                                break;
                            }
                    }
                    fl_image a;
                    refused += fl_decode(ours, bad, blen, 3, 0, 0, &a, &err) != 0;
                    snprintf(what, sizeof what, "%ux%u samp %zu q%d rst %u damage %d", w, h, ss,
                             kinds[k].q, kinds[k].restart, t);
                    compare(bad, blen, w, h, 0, what);
                    damaged++;
                    free(bad);
                }
            next:
                free(src);
            }
    /* A restart-marked file that lacks only its EOI decodes, like the plain ones. */
    unsigned long len;
    uint8_t *src = make_jpeg(64, 48, 3, 2, 2, 90, 0, 1, &len, 7);
    compare(src, len - 2, 64, 48, 1, "restart every MCU, no EOI");
    free(src);
    printf("%d files identical, %d damaged ones (%d refused)\n", files, damaged, refused);
    fl_decoder_free(ours);
    fl_decoder_free(lib);
    fl_encoder_free(enc);
    return fl_check_status();
}
