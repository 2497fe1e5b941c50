/* test_geometry.c — boxes and masks through a sample's crop, resize and flip (loader/geometry.c)
 * and the object-keeping crop (augment.c), without datasets: boxes exactly on hand-computed cases
 * and the minimum-visible rule; on label images of drawn rectangles and ellipses through many
 * random-resized crops with flips, the masks hold only source ids, every box wholly inside the
 * crop equals the extent of its object's resampled mask within 1 px and a clipped box holds the
 * visible part of its mask; a flip mirrors masks and boxes exactly; the object crop always holds
 * a box centre. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "fl_check.h"
#include "fl_error.h"
#include "geometry.h"

static int near(float a, float b) { return fabsf(a - b) < 1e-4f; }

static void exact_boxes(void)
{
    /* crop (10, 20) 100 x 50 of the source, out 200 x 100: scale 2 both ways */
    fl_aug_params ap = {.crop = {10, 20, 100, 50}, .flip = 0};
    const float src[] = {
        20,  30, 40,    60, /* inside: (20, 20, 60, 80) */
        0,   0,  15,    25, /* clipped: (0, 0, 10, 10) of (-20, -40, 10, 10): 100 of 3000 px */
        200, 0,  300,   10, /* outside: dropped */
        5,   30, 10.2f, 40, /* cut to 0.4 px wide: dropped */
        105, 65, 130,   90, /* clipped to (190, 90, 200, 100) */
    };
    float dst[5 * 4];
    uint32_t keep[5];
    uint32_t n = fl_boxes_transform(src, 5, &ap, 200, 100, 0.0f, dst, keep);
    CHECK(n == 3);
    EXPECT(keep[0] == 0 && keep[1] == 1 && keep[2] == 4);
    EXPECT(near(dst[0], 20) && near(dst[1], 20) && near(dst[2], 60) && near(dst[3], 80));
    EXPECT(near(dst[4], 0) && near(dst[5], 0) && near(dst[6], 10) && near(dst[7], 10));
    EXPECT(near(dst[8], 190) && near(dst[9], 90) && near(dst[10], 200) && near(dst[11], 100));
    /* the same with a flip: x mirrored about out_w */
    ap.flip = 1;
    n = fl_boxes_transform(src, 5, &ap, 200, 100, 0.0f, dst, keep);
    CHECK(n == 3);
    EXPECT(near(dst[0], 140) && near(dst[1], 20) && near(dst[2], 180) && near(dst[3], 80));
    EXPECT(near(dst[4], 190) && near(dst[6], 200));
    EXPECT(near(dst[8], 0) && near(dst[10], 10));
    /* min_visible 0.5: the box holding 100 of 3000 px goes; (105,65,130,90) -> (190,90,240,140)
     * holds 100 of 2500: goes too */
    ap.flip = 0;
    n = fl_boxes_transform(src, 5, &ap, 200, 100, 0.5f, dst, keep);
    EXPECT(n == 1 && keep[0] == 0);
    /* 1.0 keeps only boxes wholly inside */
    n = fl_boxes_transform(src, 5, &ap, 200, 100, 1.0f, dst, keep);
    EXPECT(n == 1 && keep[0] == 0);
    /* a box the crop does not cut is kept however thin */
    const float thin[] = {30, 30, 30.1f, 30};
    EXPECT(fl_boxes_transform(thin, 1, &ap, 200, 100, 0.9f, dst, NULL) == 1 && near(dst[0], 40) &&
           near(dst[2], 40.2f) && near(dst[1], 20) && near(dst[3], 20));
    /* a NaN box is dropped */
    const float bad[] = {NAN, 0, 50, 50};
    EXPECT(fl_boxes_transform(bad, 1, &ap, 200, 100, 0.0f, dst, NULL) == 0);
    /* int rows aligned to boxes follow them (in place) */
    int32_t lab[5] = {7, 8, 9, 10, 11};
    uint32_t k2[3] = {0, 1, 4};
    fl_rows_compact_i32(lab, k2, 3, lab);
    EXPECT(lab[0] == 7 && lab[1] == 8 && lab[2] == 11);
    /* maps: identity without a change, mirrored with a flip, pixel centres when scaling */
    uint32_t xm[8], ym[4];
    fl_aug_params id = {.crop = {0, 0, 8, 4}, .flip = 0};
    fl_geometry_maps(&id, 8, 4, xm, ym);
    for (uint32_t u = 0; u < 8; u++)
        EXPECT(xm[u] == u);
    id.flip = 1;
    fl_geometry_maps(&id, 8, 4, xm, ym);
    for (uint32_t u = 0; u < 8; u++)
        EXPECT(xm[u] == 7 - u);
    fl_aug_params half = {.crop = {2, 1, 16, 8}, .flip = 0};
    fl_geometry_maps(&half, 8, 4, xm, ym);
    for (uint32_t u = 0; u < 8; u++) /* floor((u + 0.5) * 2) = 2u + 1 */
        EXPECT(xm[u] == 2 + 2 * u + 1);
    for (uint32_t v = 0; v < 4; v++)
        EXPECT(ym[v] == 1 + 2 * v + 1);
}

/* A label image of objects (ids 1..n, rectangles and ellipses, disjoint cells of a grid) on
 * background 0, and each object's tight box. */
#define SW   160
#define SH   120
#define NOBJ 12
static uint32_t rnd_state = 12345;
static uint32_t rnd(uint32_t n)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 8) % n;
}

static void draw_objects(uint16_t *m, float *boxes, int wide)
{
    memset(m, 0, sizeof(uint16_t) * SW * SH);
    for (int i = 0; i < NOBJ; i++) {
        int cx0 = (i % 4) * (SW / 4), cy0 = (i / 4) * (SH / 3);
        int w = 8 + (int)rnd(SW / 4 - 10), h = 8 + (int)rnd(SH / 3 - 10);
        int x0 = cx0 + 1 + (int)rnd(SW / 4 - w - 1), y0 = cy0 + 1 + (int)rnd(SH / 3 - h - 1);
        uint16_t id = (uint16_t)(wide ? 300 + i : i + 1);
        int ell = i % 2;
        int bx0 = SW, by0 = SH, bx1 = 0, by1 = 0;
        for (int y = y0; y < y0 + h; y++)
            for (int x = x0; x < x0 + w; x++) {
                double dx = (x + 0.5 - (x0 + w / 2.0)) / (w / 2.0);
                double dy = (y + 0.5 - (y0 + h / 2.0)) / (h / 2.0);
                if (ell && dx * dx + dy * dy > 1.0)
                    continue;
                m[y * SW + x] = id;
                bx0 = x < bx0 ? x : bx0;
                by0 = y < by0 ? y : by0;
                bx1 = x + 1 > bx1 ? x + 1 : bx1;
                by1 = y + 1 > by1 ? y + 1 : by1;
            }
        boxes[4 * i + 0] = (float)bx0;
        boxes[4 * i + 1] = (float)by0;
        boxes[4 * i + 2] = (float)bx1;
        boxes[4 * i + 3] = (float)by1;
    }
}

/* Extent of id in an ow x oh label image (u16 or u8): 0 when absent. */
static int extent(const void *m, uint32_t elem, uint32_t ow, uint32_t oh, uint32_t id, int e[4])
{
    e[0] = (int)ow;
    e[1] = (int)oh;
    e[2] = e[3] = 0;
    int any = 0;
    for (uint32_t v = 0; v < oh; v++)
        for (uint32_t u = 0; u < ow; u++) {
            uint32_t p =
                elem == 1 ? ((const uint8_t *)m)[v * ow + u] : ((const uint16_t *)m)[v * ow + u];
            if (p != id)
                continue;
            any = 1;
            e[0] = (int)u < e[0] ? (int)u : e[0];
            e[1] = (int)v < e[1] ? (int)v : e[1];
            e[2] = (int)u + 1 > e[2] ? (int)u + 1 : e[2];
            e[3] = (int)v + 1 > e[3] ? (int)v + 1 : e[3];
        }
    return any;
}

static void consistency(uint32_t elem)
{
    enum { OW = 64, OH = 48 };
    uint16_t *m16 = malloc(sizeof(uint16_t) * SW * SH);
    uint8_t *m8 = malloc(SW * SH);
    uint16_t *out = malloc(sizeof(uint16_t) * OW * OH), *outf = malloc(sizeof(uint16_t) * OW * OH);
    float boxes[NOBJ * 4], tb[NOBJ * 4], tbf[NOBJ * 4];
    uint32_t keep[NOBJ], keepf[NOBJ], xm[OW], ym[OH];
    fl_aug_config c = {.augment = FL_AUG_RRC,
                       .flip = 1,
                       .scale_min = 0.2,
                       .scale_max = 1.0,
                       .ratio_min = 3.0 / 4,
                       .ratio_max = 4.0 / 3,
                       .out_width = OW,
                       .out_height = OH,
                       .seed = 99};
    uint32_t inside = 0, clipped = 0, flips = 0;
    for (uint64_t s = 0; s < 300; s++) {
        draw_objects(m16, boxes, elem == 2);
        const void *src = m16;
        if (elem == 1) {
            for (size_t i = 0; i < (size_t)SW * SH; i++)
                m8[i] = (uint8_t)m16[i];
            src = m8;
        }
        fl_aug_params ap;
        fl_augment_params(&c, s / 100, s, SW, SH, &ap);
        flips += ap.flip;
        fl_geometry_maps(&ap, OW, OH, xm, ym);
        fl_mask_resample(src, (size_t)SW * elem, elem, xm, ym, OW, OH, out);
        uint32_t n = fl_boxes_transform(boxes, NOBJ, &ap, OW, OH, 0.0f, tb, keep);
        /* only source ids */
        for (uint32_t p = 0; p < OW * OH; p++) {
            uint32_t v = elem == 1 ? ((uint8_t *)out)[p] : out[p];
            uint32_t base = elem == 2 ? 300 : 1;
            EXPECTF(v == 0 || (v >= base && v < base + NOBJ), "sample %llu: id %u appeared",
                    (unsigned long long)s, v);
        }
        for (uint32_t j = 0; j < n; j++) {
            uint32_t i = keep[j];
            uint32_t id = elem == 2 ? 300 + i : i + 1;
            const float *b = boxes + 4 * i;
            const float *t = tb + 4 * j;
            int whole = b[0] >= ap.crop.x && b[1] >= ap.crop.y &&
                        b[2] <= ap.crop.x + ap.crop.width && b[3] <= ap.crop.y + ap.crop.height;
            int e[4];
            int any = extent(out, elem, OW, OH, id, e);
            if (whole) {
                inside++;
                EXPECTF(any && fabsf(e[0] - t[0]) <= 1 && fabsf(e[1] - t[1]) <= 1 &&
                            fabsf(e[2] - t[2]) <= 1 && fabsf(e[3] - t[3]) <= 1,
                        "sample %llu object %u: box (%.2f %.2f %.2f %.2f) mask (%d %d %d %d)",
                        (unsigned long long)s, i, t[0], t[1], t[2], t[3], e[0], e[1], e[2], e[3]);
            } else if (any) {
                clipped++;
                EXPECTF(e[0] >= t[0] - 0.5f && e[1] >= t[1] - 0.5f && e[2] <= t[2] + 0.5f &&
                            e[3] <= t[3] + 0.5f,
                        "sample %llu object %u: clipped box (%.2f %.2f %.2f %.2f) does not hold "
                        "its mask (%d %d %d %d)",
                        (unsigned long long)s, i, t[0], t[1], t[2], t[3], e[0], e[1], e[2], e[3]);
            }
        }
        /* dropped boxes: their object shows at most a sliver (under 1 px one way) */
        /* flip symmetry: the same crop mirrored gives mirrored masks and boxes */
        fl_aug_params apf = ap;
        apf.flip = !ap.flip;
        fl_geometry_maps(&apf, OW, OH, xm, ym);
        fl_mask_resample(src, (size_t)SW * elem, elem, xm, ym, OW, OH, outf);
        for (uint32_t v = 0; v < OH; v++)
            for (uint32_t u = 0; u < OW; u++) {
                size_t a = (size_t)v * OW + u, z = (size_t)v * OW + (OW - 1 - u);
                uint32_t pa = elem == 1 ? ((uint8_t *)out)[a] : out[a];
                uint32_t pz = elem == 1 ? ((uint8_t *)outf)[z] : outf[z];
                if (pa != pz) {
                    EXPECTF(0, "sample %llu: flip is not a mirror at (%u, %u)",
                            (unsigned long long)s, u, v);
                    v = OH;
                    break;
                }
            }
        uint32_t nf = fl_boxes_transform(boxes, NOBJ, &apf, OW, OH, 0.0f, tbf, keepf);
        EXPECT(nf == n);
        for (uint32_t j = 0; j < n && j < nf; j++)
            EXPECT(keepf[j] == keep[j] && near(tbf[4 * j], OW - tb[4 * j + 2]) &&
                   near(tbf[4 * j + 2], OW - tb[4 * j]) && tbf[4 * j + 1] == tb[4 * j + 1] &&
                   tbf[4 * j + 3] == tb[4 * j + 3]);
    }
    EXPECTF(inside > 300 && clipped > 50 && flips > 100 && flips < 200,
            "too few cases: %u inside, %u clipped, %u flips", inside, clipped, flips);
    free(m16);
    free(m8);
    free(out);
    free(outf);
}

static void object_crop(void)
{
    fl_aug_config c = {.augment = FL_AUG_OBJECT_CROP,
                       .flip = 1,
                       .scale_min = 0.05,
                       .scale_max = 0.3,
                       .ratio_min = 0.5,
                       .ratio_max = 2.0,
                       .out_width = 32,
                       .out_height = 32,
                       .seed = 3};
    uint32_t cropped = 0;
    for (uint64_t s = 0; s < 2000; s++) {
        /* one to three small boxes somewhere in a 640 x 480 image */
        float b[12];
        uint32_t n = 1 + (uint32_t)(s % 3);
        for (uint32_t i = 0; i < n; i++) {
            float x = (float)rnd(600), y = (float)rnd(440);
            b[4 * i] = x;
            b[4 * i + 1] = y;
            b[4 * i + 2] = x + 1 + (float)rnd(39);
            b[4 * i + 3] = y + 1 + (float)rnd(39);
        }
        fl_aug_params ap, again;
        fl_augment_object_params(&c, 1, s, 640, 480, b, n, &ap);
        fl_augment_object_params(&c, 1, s, 640, 480, b, n, &again);
        EXPECT(!memcmp(&ap, &again, sizeof ap));
        const fl_rect *r = &ap.crop;
        EXPECT(r->x + r->width <= 640 && r->y + r->height <= 480 && r->width && r->height);
        int held = 0;
        for (uint32_t i = 0; i < n; i++) {
            double cx = (b[4 * i] + b[4 * i + 2]) / 2, cy = (b[4 * i + 1] + b[4 * i + 3]) / 2;
            held |= cx >= r->x && cx < r->x + r->width && cy >= r->y && cy < r->y + r->height;
        }
        EXPECTF(held, "sample %llu: crop (%u %u %u %u) holds no box centre", (unsigned long long)s,
                r->x, r->y, r->width, r->height);
        cropped += r->width < 640;
    }
    EXPECTF(cropped > 1900, "only %u of 2000 draws cropped", cropped);
    /* no boxes: the whole image */
    fl_aug_params ap;
    fl_augment_object_params(&c, 0, 0, 640, 480, NULL, 0, &ap);
    EXPECT(ap.crop.x == 0 && ap.crop.y == 0 && ap.crop.width == 640 && ap.crop.height == 480);
}

int main(void)
{
    exact_boxes();
    consistency(1);
    consistency(2);
    object_crop();
    return fl_check_status();
}
