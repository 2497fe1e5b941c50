/* geometry.c — boxes and masks through a sample's crop, resize and flip; see geometry.h. */
#include "geometry.h"

#include <string.h>

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

uint32_t fl_boxes_transform(const void *src, uint32_t n, const fl_aug_params *ap, uint32_t out_w,
                            uint32_t out_h, float min_visible, float *dst, uint32_t *keep)
{
    const fl_rect *r = &ap->crop;
    double W = out_w, H = out_h;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; i++) {
        float b[4];
        memcpy(b, (const uint8_t *)src + 16 * (size_t)i, sizeof b);
        /* multiply before dividing: a box edge on the crop's edge lands exactly on the output's */
        double x0 = ((double)b[0] - r->x) * W / r->width, x1 = ((double)b[2] - r->x) * W / r->width;
        double y0 = ((double)b[1] - r->y) * H / r->height,
               y1 = ((double)b[3] - r->y) * H / r->height;
        double cx0 = clampd(x0, 0, W), cx1 = clampd(x1, 0, W);
        double cy0 = clampd(y0, 0, H), cy1 = clampd(y1, 0, H);
        int whole = x0 >= 0 && y0 >= 0 && x1 <= W && y1 <= H;
        if (!whole) {
            /* NaN-safe: a comparison with NaN is false, so such a box is dropped */
            double cw = cx1 - cx0, ch = cy1 - cy0, area = (x1 - x0) * (y1 - y0);
            if (!(cw >= 1.0 && ch >= 1.0 && cw * ch >= (double)min_visible * area * (1 - 1e-9)))
                continue;
        }
        float *d = dst + 4 * (size_t)kept;
        if (ap->flip) {
            d[0] = (float)(W - cx1);
            d[2] = (float)(W - cx0);
        } else {
            d[0] = (float)cx0;
            d[2] = (float)cx1;
        }
        d[1] = (float)cy0;
        d[3] = (float)cy1;
        if (keep)
            keep[kept] = i;
        kept++;
    }
    return kept;
}

void fl_rows_compact_i32(const void *src, const uint32_t *keep, uint32_t nkeep, int32_t *dst)
{
    for (uint32_t j = 0; j < nkeep; j++)
        memmove(&dst[j], (const uint8_t *)src + 4 * (size_t)keep[j], 4);
}

void fl_geometry_maps(const fl_aug_params *ap, uint32_t out_w, uint32_t out_h, uint32_t *xmap,
                      uint32_t *ymap)
{
    const fl_rect *r = &ap->crop;
    /* floor((u + 0.5) * w / out) in integers: exact, and always < w */
    for (uint32_t u = 0; u < out_w; u++) {
        uint32_t s = r->x + (uint32_t)(((2 * (uint64_t)u + 1) * r->width) / (2 * (uint64_t)out_w));
        xmap[ap->flip ? out_w - 1 - u : u] = s;
    }
    for (uint32_t v = 0; v < out_h; v++)
        ymap[v] = r->y + (uint32_t)(((2 * (uint64_t)v + 1) * r->height) / (2 * (uint64_t)out_h));
}

void fl_mask_resample(const void *src, size_t src_stride, uint32_t elem, const uint32_t *xmap,
                      const uint32_t *ymap, uint32_t out_w, uint32_t out_h, void *dst)
{
    const uint8_t *s8 = src;
    if (elem == 1) {
        uint8_t *d = dst;
        for (uint32_t v = 0; v < out_h; v++, d += out_w) {
            const uint8_t *row = s8 + (size_t)ymap[v] * src_stride;
            for (uint32_t u = 0; u < out_w; u++)
                d[u] = row[xmap[u]];
        }
    } else {
        uint16_t *d = dst;
        for (uint32_t v = 0; v < out_h; v++, d += out_w) {
            const uint16_t *row = (const uint16_t *)(s8 + (size_t)ymap[v] * src_stride);
            for (uint32_t u = 0; u < out_w; u++)
                d[u] = row[xmap[u]];
        }
    }
}
