/* augment.c — random-resized-crop / center-crop / flip parameter sampling (see augment.h), and
 * the evaluation crop of the public API (fl_loader_eval_crop, fastload.h) over the same code. */
#include "augment.h"

#include <math.h>

#include "rng.h"

/* Python's int(round(x)): round half to even (the default FP rounding mode). */
static int64_t pyround(double x) { return (int64_t)nearbyint(x); }

static uint32_t clampu(int64_t v, uint32_t lo, uint32_t hi)
{
    return v < (int64_t)lo ? lo : v > (int64_t)hi ? hi : (uint32_t)v;
}

/* The flip has its own stream so that it does not depend on how many crop tries ran. */
static void draw_flip(const fl_aug_config *c, uint64_t epoch, uint64_t pos, fl_aug_params *out)
{
    fl_rng rf = fl_rng_init(c->seed, epoch, pos, FL_STREAM_AUGMENT + 16);
    out->flip = c->flip ? (fl_rng_next(&rf) >> 63) != 0 : 0;
}

static void rrc(const fl_aug_config *c, fl_rng *r, uint32_t W, uint32_t H, fl_rect *out)
{
    double area = (double)W * (double)H;
    double lr0 = log(c->ratio_min), lr1 = log(c->ratio_max);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (c->scale_min + (c->scale_max - c->scale_min) * fl_rng_uniform(r));
        double aspect = exp(lr0 + (lr1 - lr0) * fl_rng_uniform(r));
        int64_t w = pyround(sqrt(target * aspect));
        int64_t h = pyround(sqrt(target / aspect));
        if (w > 0 && w <= (int64_t)W && h > 0 && h <= (int64_t)H) {
            out->y = (uint32_t)fl_rng_below(r, H - (uint64_t)h + 1);
            out->x = (uint32_t)fl_rng_below(r, W - (uint64_t)w + 1);
            out->width = (uint32_t)w;
            out->height = (uint32_t)h;
            return;
        }
    }
    double in_ratio = (double)W / (double)H;
    int64_t w, h;
    if (in_ratio < c->ratio_min) {
        w = W;
        h = pyround((double)w / c->ratio_min);
    } else if (in_ratio > c->ratio_max) {
        h = H;
        w = pyround((double)h * c->ratio_max);
    } else {
        w = W;
        h = H;
    }
    out->width = clampu(w, 1, W);
    out->height = clampu(h, 1, H);
    out->x = (W - out->width) / 2;
    out->y = (H - out->height) / 2;
}

/* torchvision eval: Resize(shorter side = out / center_ratio) then CenterCrop(out), expressed
 * as one crop of the source so it can be decoded and resampled in a single pass. */
static void center(const fl_aug_config *c, uint32_t W, uint32_t H, fl_rect *out)
{
    double omin = c->out_width < c->out_height ? c->out_width : c->out_height;
    double resized_short = floor(omin / c->center_ratio);
    if (resized_short < 1)
        resized_short = 1;
    double k = resized_short / (double)(W < H ? W : H); /* source → resized scale */
    out->width = clampu(pyround(c->out_width / k), 1, W);
    out->height = clampu(pyround(c->out_height / k), 1, H);
    out->x = (W - out->width) / 2;
    out->y = (H - out->height) / 2;
}

void fl_augment_params(const fl_aug_config *c, uint64_t epoch, uint64_t pos, uint32_t W, uint32_t H,
                       fl_aug_params *out)
{
    fl_rng r = fl_rng_init(c->seed, epoch, pos, FL_STREAM_AUGMENT);
    switch (c->augment) {
    case FL_AUG_RRC: rrc(c, &r, W, H, &out->crop); break;
    case FL_AUG_CENTER: center(c, W, H, &out->crop); break;
    default:
        out->crop.x = out->crop.y = 0;
        out->crop.width = W;
        out->crop.height = H;
        break;
    }
    draw_flip(c, epoch, pos, out);
}

void fl_augment_object_params(const fl_aug_config *c, uint64_t epoch, uint64_t pos, uint32_t W,
                              uint32_t H, const float *boxes, uint32_t n, fl_aug_params *out)
{
    fl_rng r = fl_rng_init(c->seed, epoch, pos, FL_STREAM_AUGMENT);
    out->crop = (fl_rect){0, 0, W, H};
    double area = (double)W * (double)H;
    double lr0 = log(c->ratio_min), lr1 = log(c->ratio_max);
    for (int t = 0; n > 0 && t < FL_OBJECT_CROP_TRIES; t++) {
        double target = area * (c->scale_min + (c->scale_max - c->scale_min) * fl_rng_uniform(&r));
        double aspect = exp(lr0 + (lr1 - lr0) * fl_rng_uniform(&r));
        int64_t w = pyround(sqrt(target * aspect));
        int64_t h = pyround(sqrt(target / aspect));
        if (w <= 0 || w > (int64_t)W || h <= 0 || h > (int64_t)H)
            continue;
        uint32_t y = (uint32_t)fl_rng_below(&r, H - (uint64_t)h + 1);
        uint32_t x = (uint32_t)fl_rng_below(&r, W - (uint64_t)w + 1);
        for (uint32_t i = 0; i < n; i++) {
            const float *b = boxes + 4 * (size_t)i;
            double cx = 0.5 * ((double)b[0] + b[2]), cy = 0.5 * ((double)b[1] + b[3]);
            if (cx >= x && cx < (double)x + w && cy >= y && cy < (double)y + h) {
                out->crop = (fl_rect){x, y, (uint32_t)w, (uint32_t)h};
                draw_flip(c, epoch, pos, out);
                return;
            }
        }
    }
    draw_flip(c, epoch, pos, out);
}

int fl_loader_eval_crop(const fl_loader_options *o, uint32_t src_w, uint32_t src_h, fl_rect *crop,
                        fl_error *err)
{
    if (o->augment != FL_AUG_CENTER && o->augment != FL_AUG_NONE)
        return fl_error_set(err, FL_E_INVALID,
                            "eval crop: augment %d is not FL_AUG_CENTER or "
                            "FL_AUG_NONE (a random crop depends on the sample's draw)",
                            (int)o->augment);
    if (o->flip)
        return fl_error_set(err, FL_E_INVALID, "eval crop: flip is set (a random draw per sample)");
    if (!o->out_width || !o->out_height || !src_w || !src_h)
        return fl_error_set(err, FL_E_INVALID, "eval crop: output %ux%u, source %ux%u: a size is 0",
                            o->out_width, o->out_height, src_w, src_h);
    if (o->augment == FL_AUG_CENTER && !(o->center_ratio > 0 && o->center_ratio <= 1))
        return fl_error_set(err, FL_E_INVALID, "center_ratio %g must lie in (0, 1]",
                            o->center_ratio);
    fl_aug_config c = {.augment = o->augment,
                       .center_ratio = o->center_ratio,
                       .out_width = o->out_width,
                       .out_height = o->out_height,
                       .seed = o->seed};
    fl_aug_params ap;
    fl_augment_params(&c, 0, 0, src_w, src_h, &ap);
    *crop = ap.crop;
    return 0;
}
