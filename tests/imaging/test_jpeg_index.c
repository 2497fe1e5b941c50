/* test_jpeg_index.c — JPEG entry-point indexes (fl_decoder_set_jpeg_index / fl_decoder_jpeg_index)
 * change how much of a file a crop decode reads, never its pixels: on every JPEG kind libjpeg
 * writes without restart markers (odd sizes, gray (also 2x2-sampled), 4:2:0 / 4:2:2 / 4:4:0 /
 * 4:4:4, qualities 30-100, optimized tables), crop decodes given the index that earlier decodes of
 * the file learned are byte-identical to decodes without one, at every stage of the index's growth;
 * a full decode learns the whole index. An index is ignored for any other file (also one of the
 * same size and tables), and indexes cut short, with their head or entries changed, or random bytes
 * never make a decode crash or read outside its data (run under ASan in the sanitizer build): an
 * index cut short or with a changed head is ignored. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_check.h"
#include "fl_error.h"
#include "fl_image.h"
#include "pattern_jpeg.h"

static uint32_t rng = 777;
static uint32_t rnd(uint32_t n)
{
    rng = rng * 1664525u + 1013904223u;
    return n ? (rng >> 8) % n : 0;
}

static fl_decoder *plain, *indexed;
static fl_error err;

/* Crop r of f decoded without an index and with `ix`: same rc, same bytes. The index the
 * indexed decode hands back (if any) replaces *ix. Returns 1 when they agree. */
static int crop_same(const uint8_t *f, size_t len, fl_rect r, uint32_t os, uint32_t ch,
                     uint8_t **ix, size_t *ixn, const char *what)
{
    static uint8_t a[128 * 128 * 3], b[128 * 128 * 3];
    int ra = fl_decode_crop_resize(plain, f, len, &r, os, os, ch, 0, a, &err);
    fl_decoder_set_jpeg_index(indexed, *ix, *ixn);
    int rb = fl_decode_crop_resize(indexed, f, len, &r, os, os, ch, 0, b, &err);
    const void *grown;
    size_t n = fl_decoder_jpeg_index(indexed, &grown);
    if (n) {
        uint8_t *copy = malloc(n);
        memcpy(copy, grown, n);
        free(*ix);
        *ix = copy;
        *ixn = n;
    }
    int same = ra == 0 && rb == 0 && !memcmp(a, b, (size_t)os * os * ch);
    EXPECTF(same, "%s: crop %ux%u+%u+%u -> %u ch %u: rc %d / %d, %s", what, r.width, r.height, r.x,
            r.y, os, ch, ra, rb, ra || rb ? err.msg : "pixels differ");
    return same;
}

static fl_rect random_crop(uint32_t w, uint32_t h)
{
    fl_rect r = {0, 0, 1 + rnd(w), 1 + rnd(h)};
    r.x = rnd(w - r.width + 1);
    r.y = rnd(h - r.height + 1);
    return r;
}

int main(void)
{
    CHECK_OK(fl_decoder_create(0, &plain, &err), &err);
    CHECK_OK(fl_decoder_create(0, &indexed, &err), &err);
    static const uint32_t sizes[][2] = {{1, 1},    {17, 9},    {64, 48},  {333, 211},
                                        {31, 260}, {500, 375}, {1203, 77}};
    static const int samp[][3] = {{3, 2, 2}, {3, 2, 1}, {3, 1, 2}, {3, 1, 1}, {1, 1, 1}, {1, 2, 2}};
    static const int quality[] = {30, 90, 100};
    char what[160];
    int files = 0, crops = 0, grew = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t ss = 0; ss < sizeof samp / sizeof *samp; ss++)
            for (size_t q = 0; q < sizeof quality / sizeof *quality; q++) {
                uint32_t w = sizes[si][0], h = sizes[si][1];
                pattern_jpeg o = {.w = w,
                                  .h = h,
                                  .comps = samp[ss][0],
                                  .hs = samp[ss][1],
                                  .vs = samp[ss][2],
                                  .quality = quality[q],
                                  .optimize = (int)(q & 1),
                                  .noise_shift = 27,
                                  .noise_bias = 16,
                                  .tile_w = 23,
                                  .tile_h = 17,
                                  .seed = (uint32_t)(si * 13 + ss * 5 + q)};
                unsigned long len;
                uint8_t *f = make_pattern_jpeg(&o, &len);
                snprintf(what, sizeof what, "%ux%u samp %zu q%d", w, h, ss, quality[q]);
                files++;
                /* the index grows crop by crop; every stage gives the same pixels */
                uint8_t *ix = NULL;
                size_t ixn = 0;
                for (int t = 0; t < 12; t++, crops++) {
                    size_t before = ixn;
                    crop_same(f, len, random_crop(w, h), 8 + rnd(120), t & 1 ? 3 : 1, &ix, &ixn,
                              what);
                    grew += ixn > before;
                }
                /* a full decode learns every entry point; crops with the whole index */
                fl_image img;
                fl_decoder_set_jpeg_index(indexed, ix, ixn);
                CHECK_OK(fl_decode(indexed, f, len, 3, 0, 0, &img, &err), &err);
                const void *full;
                size_t fulln = fl_decoder_jpeg_index(indexed, &full);
                if (fulln) {
                    free(ix);
                    ix = malloc(fulln);
                    memcpy(ix, full, fulln);
                    ixn = fulln;
                }
                for (int t = 0; t < 8; t++, crops++)
                    crop_same(f, len, random_crop(w, h), 8 + rnd(120), 3, &ix, &ixn, what);
                /* the same file a second time: nothing new to learn */
                fl_decoder_set_jpeg_index(indexed, ix, ixn);
                CHECK_OK(fl_decode(indexed, f, len, 3, 0, 0, &img, &err), &err);
                EXPECTF(fl_decoder_jpeg_index(indexed, &full) == 0 && full == NULL,
                        "%s: a full decode given the full index reports a new one", what);
                /* another file of the same size, sampling and tables: its index is ignored */
                o.seed += 1000;
                unsigned long len2;
                uint8_t *g = make_pattern_jpeg(&o, &len2);
                uint8_t *ixg = malloc(ixn ? ixn : 1);
                if (ixn)
                    memcpy(ixg, ix, ixn);
                size_t ixgn = ixn;
                for (int t = 0; t < 4; t++, crops++)
                    crop_same(g, len2, random_crop(w, h), 8 + rnd(120), 3, &ixg, &ixgn, what);
                free(ixg);
                /* damaged indexes: cut short, head fields and entries changed, random bytes */
                for (int t = 0; t < 60 && ixn; t++, crops++) {
                    uint8_t *bad = malloc(ixn + 64);
                    memcpy(bad, ix, ixn);
                    size_t badn = ixn;
                    int kind = t % 4;
                    if (kind == 0)
                        badn = rnd((uint32_t)ixn);
                    else if (kind == 1)
                        bad[rnd(32)] ^= (uint8_t)(1u << rnd(8));
                    else if (kind == 2)
                        for (int k = 0; k < 4; k++)
                            bad[32 + rnd((uint32_t)(ixn > 32 ? ixn - 32 : 1))] = (uint8_t)rnd(256);
                    else
                        for (size_t k = 32; k < ixn; k++)
                            bad[k] = (uint8_t)rnd(256);
                    static uint8_t out[64 * 64 * 3], ref[64 * 64 * 3];
                    fl_rect r = random_crop(w, h);
                    fl_decoder_set_jpeg_index(indexed, bad, badn);
                    int rc = fl_decode_crop_resize(indexed, f, len, &r, 64, 64, 3, 0, out, &err);
                    if (kind < 2) { /* ignored: the pixels of a decode without an index */
                        CHECK_OK(fl_decode_crop_resize(plain, f, len, &r, 64, 64, 3, 0, ref, &err),
                                 &err);
                        EXPECTF(rc == 0 && !memcmp(out, ref, sizeof out), "%s: index %s: rc %d",
                                what, kind ? "head changed" : "cut short", rc);
                    } /* changed entries: any pixels or a decode error, but no crash */
                    free(bad);
                }
                free(ix);
                free(g);
                free(f);
            }
    printf("%d files, %d crops (%d grew the index)\n", files, crops, grew);
    CHECK(grew > files); /* indexes are learned, and grow */
    fl_decoder_free(plain);
    fl_decoder_free(indexed);
    return fl_check_status();
}
