/* test_jpeg_restart_copy.c — fl_jpeg_add_restarts is lossless on every kind of JPEG: sizes from
 * 1x1 to odd sizes with partial MCUs, 4:2:0 / 4:2:2 / 4:4:0 / 4:4:4 / gray, qualities 30-100,
 * standard or optimized Huffman tables, progressive and already-restart-marked inputs, each at
 * 1, 4 and row MCUs per interval: the rewrite decodes to exactly the input's pixels, carries a DRI
 * and the restart markers it implies in sequence. Sequential files with standard tables take the
 * bit-copying path (their Huffman tables come out as they went in); truncated and corrupt inputs
 * are refused or give the pixels libjpeg gives, never crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "fl_check.h"
#include "pattern_jpeg.h"
#include "fl_error.h"
#include "fl_image.h"

/* A JPEG of the smooth + lightly noisy pattern (pattern_jpeg.h); restart_rows: MCU rows per
 * interval. */
static uint8_t *make_jpeg(uint32_t w, uint32_t h, int comps, int hs, int vs, int quality,
                          int optimize, int progressive, int restart_rows, unsigned long *len,
                          uint32_t seed)
{
    pattern_jpeg o = {.w = w,
                      .h = h,
                      .comps = comps,
                      .hs = hs,
                      .vs = vs,
                      .quality = quality,
                      .optimize = optimize,
                      .progressive = progressive,
                      .restart_rows = restart_rows,
                      .noise_shift = 28,
                      .noise_bias = 8,
                      .tile_w = 23,
                      .tile_h = 17,
                      .seed = seed};
    return make_pattern_jpeg(&o, len);
}

/* The DRI interval (0: none) and the RST markers of the entropy data, checked to be in order. */
static int restart_markers(const uint8_t *p, size_t n, uint32_t *ri, uint32_t *count)
{
    *ri = 0;
    *count = 0;
    size_t i = 2;
    while (i + 4 <= n && p[i] == 0xFF && p[i + 1] != 0xDA) {
        uint32_t l = (uint32_t)p[i + 2] << 8 | p[i + 3];
        if (p[i + 1] == 0xDD)
            *ri = (uint32_t)p[i + 4] << 8 | p[i + 5];
        i += 2 + l;
    }
    for (; i + 1 < n; i++)
        if (p[i] == 0xFF && p[i + 1] >= 0xD0 && p[i + 1] <= 0xD7) {
            if (p[i + 1] != 0xD0 + (*count & 7))
                return -1;
            (*count)++;
        }
    return 0;
}

static const uint8_t *find_dht(const uint8_t *p, size_t n, size_t *len)
{
    for (size_t i = 2; i + 4 <= n && p[i] == 0xFF && p[i + 1] != 0xDA;) {
        uint32_t l = (uint32_t)p[i + 2] << 8 | p[i + 3];
        if (p[i + 1] == 0xC4) {
            *len = l;
            return p + i;
        }
        i += 2 + l;
    }
    return NULL;
}

int main(void)
{
    fl_error err;
    fl_encoder *enc;
    fl_decoder *d1, *d2;
    CHECK_OK(fl_encoder_create(&enc, &err), &err);
    CHECK_OK(fl_decoder_create(0, &d1, &err), &err);
    CHECK_OK(fl_decoder_create(0, &d2, &err), &err);
    static const uint32_t sizes[][2] = {{1, 1},     {8, 8},     {17, 9},  {64, 48},
                                        {333, 211}, {500, 375}, {31, 260}};
    static const int samp[][3] = {{3, 2, 2}, {3, 2, 1}, {3, 1, 2}, {3, 1, 1}, {1, 1, 1}};
    static const uint32_t mcus[] = {1, 4, 0};
    int cases = 0, copied = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t ss = 0; ss < sizeof samp / sizeof *samp; ss++)
            for (int kind = 0; kind < 5; kind++) {
                /* 0 standard tables q90, 1 q30, 2 q100 + optimized tables, 3 progressive,
                 * 4 restart markers already (one per row) */
                uint32_t w = sizes[si][0], h = sizes[si][1];
                int q = kind == 1 ? 30 : kind == 2 ? 100 : 90;
                unsigned long len;
                uint8_t *src =
                    make_jpeg(w, h, samp[ss][0], samp[ss][1], samp[ss][2], q, kind == 2, kind == 3,
                              kind == 4, &len, (uint32_t)(si * 31 + ss * 7 + kind));
                uint32_t ch = (uint32_t)samp[ss][0];
                fl_image a, b;
                CHECK_OK(fl_decode(d1, src, len, ch, 0, 0, &a, &err), &err);
                for (size_t m = 0; m < sizeof mcus / sizeof *mcus; m++) {
                    const uint8_t *out;
                    size_t out_len;
                    cases++;
                    int rc = fl_jpeg_add_restarts(enc, src, len, mcus[m], &out, &out_len, &err);
                    EXPECTF(rc == 0, "%ux%u samp %d kind %d mcus %u: %s", w, h, (int)ss, kind,
                            mcus[m], err.msg);
                    if (rc)
                        continue;
                    rc = fl_decode(d2, out, out_len, ch, 0, 0, &b, &err);
                    EXPECTF(rc == 0, "%ux%u samp %d kind %d mcus %u: rewrite does not decode: %s",
                            w, h, (int)ss, kind, mcus[m], err.msg);
                    if (rc)
                        continue;
                    int same = a.width == b.width && a.height == b.height;
                    for (uint32_t y = 0; same && y < a.height; y++)
                        same = !memcmp(a.pixels + (size_t)y * a.stride,
                                       b.pixels + (size_t)y * b.stride, (size_t)a.width * ch);
                    EXPECTF(same, "%ux%u samp %d kind %d mcus %u: pixels differ", w, h, (int)ss,
                            kind, mcus[m]);
                    uint32_t ri, n;
                    EXPECTF(restart_markers(out, out_len, &ri, &n) == 0,
                            "%ux%u samp %d kind %d: RST out of order", w, h, (int)ss, kind);
                    uint32_t mw = ch == 1 ? 8 : 8 * (uint32_t)samp[ss][1],
                             mh = ch == 1 ? 8 : 8 * (uint32_t)samp[ss][2];
                    uint32_t per_row = (w + mw - 1) / mw, rows = (h + mh - 1) / mh, want = per_row;
                    if (mcus[m])
                        for (want = mcus[m] < per_row ? mcus[m] : per_row; per_row % want; want--) {
                        }
                    EXPECTF(ri == want, "%ux%u samp %d kind %d mcus %u: DRI %u, want %u", w, h,
                            (int)ss, kind, mcus[m], ri, want);
                    uint64_t total = (uint64_t)per_row * rows;
                    EXPECTF(ri && n == (total + ri - 1) / ri - 1,
                            "%ux%u samp %d kind %d: %u RST markers for %llu MCUs / %u", w, h,
                            (int)ss, kind, n, (unsigned long long)total, ri);
                    /* sequential inputs with standard tables keep them: the bits were copied */
                    size_t l1 = 0, l2 = 0;
                    const uint8_t *h1 = find_dht(src, len, &l1), *h2 = find_dht(out, out_len, &l2);
                    if (kind == 0 || kind == 1) {
                        int kept = h1 && h2 && l1 == l2 && !memcmp(h1, h2, l1);
                        EXPECTF(kept,
                                "%ux%u samp %d kind %d: Huffman tables changed (not bit-copied)", w,
                                h, (int)ss, kind);
                        copied += kept;
                    }
                }
                if (si == 4 && kind < 2) {
                    /* truncated: refused; every byte flipped in turn over a stretch of the data:
                     * no crash, and a rewrite that succeeds decodes as libjpeg decodes it */
                    const uint8_t *out;
                    size_t out_len;
                    int rc = fl_jpeg_add_restarts(enc, src, len * 2 / 3, 4, &out, &out_len, &err);
                    EXPECTF(rc < 0, "%ux%u samp %d kind %d: truncated input accepted", w, h,
                            (int)ss, kind);
                    uint8_t *bad = malloc(len);
                    for (size_t at = len / 2; at < len / 2 + 64 && at < len - 2; at++) {
                        memcpy(bad, src, len);
                        bad[at] ^= 0x5A;
                        if (fl_jpeg_add_restarts(enc, bad, len, 4, &out, &out_len, &err))
                            continue;
                        fl_image x, y;
                        if (fl_decode(d1, bad, len, ch, 0, 0, &x, &err))
                            continue;
                        int same = fl_decode(d2, out, out_len, ch, 0, 0, &y, &err) == 0 &&
                                   x.width == y.width && x.height == y.height;
                        for (uint32_t r = 0; same && r < x.height; r++)
                            same = !memcmp(x.pixels + (size_t)r * x.stride,
                                           y.pixels + (size_t)r * y.stride, (size_t)x.width * ch);
                        EXPECTF(same, "flipped byte %zu: rewrite decodes otherwise than the input",
                                at);
                    }
                    free(bad);
                }
                free(src);
            }
    EXPECTF(copied > 100, "only %d rewrites were bit copies", copied);
    printf("%d rewrites, %d bit-copied\n", cases, copied);
    fl_encoder_free(enc);
    fl_decoder_free(d1);
    fl_decoder_free(d2);
    return fl_check_status();
}
