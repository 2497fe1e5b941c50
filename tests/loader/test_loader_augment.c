/* test_loader_augment.c — augmented outputs equal a CPU reference computed here: for raw records
 * RRC+flip and center crop equal "full image → crop → fl_resize" exactly; for JPEG records they
 * equal fl_decode_crop_resize of the same crop exactly and stay close to "decode full → crop →
 * fl_resize" (the loader decodes at a reduced DCT scale where that still covers the output). */
#include <math.h>
#include <string.h>

#include "augment.h"
#include "fixture.h"
#include "fl_image.h"
#include "order.h"

static void reference(const fl_loader_options *o, const fl_batch *b, const fl_dataset *ds,
                      uint32_t k, fl_aug_params *ap)
{
    fl_order_plan plan;
    fl_error err;
    CHECK_OK(fl_order_plan_init(&plan, fl_dataset_count(ds), o->order, o->quasi_block,
                                o->quasi_window, o->seed, o->rank, o->world, o->batch_size,
                                o->drop_last, &err),
             &err);
    fl_aug_config c = {.augment = o->augment,
                       .flip = o->flip,
                       .scale_min = o->scale_min,
                       .scale_max = o->scale_max,
                       .ratio_min = o->ratio_min,
                       .ratio_max = o->ratio_max,
                       .center_ratio = o->center_ratio,
                       .out_width = o->out_width,
                       .out_height = o->out_height,
                       .seed = o->seed};
    fl_record_info info;
    CHECK_OK(fl_dataset_record_info(ds, b->indices[k], &info, &err), &err);
    fl_augment_params(&c, b->epoch, fl_order_pos(&plan, b->batch, k), info.width, info.height, ap);
}

static void raw_case(const char *path, const fx_spec *s, fl_augment aug)
{
    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 4;
    o.order = FL_ORDER_RANDOM;
    o.augment = aug;
    o.flip = 1;
    o.out_height = 16;
    o.out_width = 20;
    o.seed = 5;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    size_t ob = 16 * 20 * 3;
    uint8_t *full = malloc((size_t)s->height * s->width * 3), *ref = malloc(ob);
    int flips = 0, nontrivial = 0;
    for (int bi = 0; bi < 8; bi++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        for (uint32_t k = 0; k < b->size; k++) {
            fl_aug_params ap;
            reference(&o, b, fl_loader_dataset(L), k, &ap);
            fx_fill(b->indices[k], s->height, s->width, 3, full);
            const uint8_t *src = full + ((size_t)ap.crop.y * s->width + ap.crop.x) * 3;
            CHECK_OK(fl_resize(src, ap.crop.width, ap.crop.height, (size_t)s->width * 3, 3, ref, 20,
                               16, 20 * 3, ap.flip, NULL, 0, &err),
                     &err);
            if (memcmp(ref, b->images + k * ob, ob) != 0) {
                fprintf(stderr,
                        "batch %d sample %u (record %llu, crop %u,%u %ux%u flip %d) differs\n", bi,
                        k, (unsigned long long)b->indices[k], ap.crop.x, ap.crop.y, ap.crop.width,
                        ap.crop.height, ap.flip);
                exit(1);
            }
            flips += ap.flip;
            nontrivial += ap.crop.width != s->width || ap.crop.height != s->height;
        }
        fl_loader_release(L, b);
    }
    CHECK(flips > 4 && flips < 28);
    CHECK(nontrivial > 0);
    free(full);
    free(ref);
    fl_loader_close(L);
}

static void jpeg_case(const char *path, unsigned flags)
{
    fl_loader_options o;
    fx_options(&o);
    o.decode_flags = flags;
    o.batch_size = 4;
    o.order = FL_ORDER_RANDOM;
    o.augment = FL_AUG_RRC;
    o.flip = 1;
    o.out_height = o.out_width = 24;
    o.seed = 11;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    const fl_dataset *ds = fl_loader_dataset(L);
    fl_decoder *d;
    CHECK_OK(fl_decoder_create(0, &d, &err), &err);
    fl_decoder_set_flags(d, flags);
    size_t ob = 24 * 24 * 3;
    uint8_t *ref = malloc(ob), *ref2 = malloc(ob);
    double sum_diff = 0;
    int nsamples = 0;
    for (int bi = 0; bi < 4; bi++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        for (uint32_t k = 0; k < b->size; k++) {
            fl_aug_params ap;
            reference(&o, b, ds, k, &ap);
            const uint8_t *data;
            size_t len;
            CHECK_OK(fl_dataset_get(ds, b->indices[k], &data, &len, 1, &err), &err);
            CHECK_OK(fl_decode_crop_resize(d, data, len, &ap.crop, 24, 24, 3, ap.flip, ref, &err),
                     &err);
            CHECK(memcmp(ref, b->images + k * ob, ob) == 0);
            fl_image full;
            CHECK_OK(fl_decode(d, data, len, 3, 0, 0, &full, &err), &err);
            const uint8_t *src = full.pixels + ap.crop.y * full.stride + (size_t)ap.crop.x * 3;
            CHECK_OK(fl_resize(src, ap.crop.width, ap.crop.height, full.stride, 3, ref2, 24, 24,
                               24 * 3, ap.flip, NULL, 0, &err),
                     &err);
            double diff = 0;
            for (size_t i = 0; i < ob; i++)
                diff += fabs((double)ref2[i] - b->images[k * ob + i]);
            sum_diff += diff / ob;
            nsamples++;
        }
        fl_loader_release(L, b);
    }
    double mad = sum_diff / nsamples;
    printf("JPEG RRC (decode flags %u): exact vs fl_decode_crop_resize; mean |diff| vs full "
           "decode→crop→resize %.2f\n",
           flags, mad);
    CHECK(mad < 6.0);
    free(ref);
    free(ref2);
    fl_decoder_free(d);
    fl_loader_close(L);
}

int main(void)
{
    char *dir = fx_tmpdir("aug");
    fx_spec s = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_RAW,
                 .compression = FL_COMP_ZSTD,
                 .n = 40,
                 .height = 30,
                 .width = 40,
                 .channels = 3,
                 .classes = 2,
                 .shard_bytes = 16384};
    char *p = fx_make(dir, "raw", &s);
    raw_case(p, &s, FL_AUG_RRC);
    raw_case(p, &s, FL_AUG_CENTER);
    free(p);
    fx_spec j = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_JPEG,
                 .compression = FL_COMP_NONE,
                 .n = 16,
                 .height = 96,
                 .width = 128,
                 .channels = 3,
                 .classes = 2,
                 .shard_bytes = 65536,
                 .vary_size = 1};
    p = fx_make(dir, "jpeg", &j);
    jpeg_case(p, 0);
    jpeg_case(p, FL_DECODE_FAST);
    free(p);
    fx_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
