/* test_loader_eval_crop.c — fl_loader_eval_crop (fastload.h), the evaluation crop a caller that
 * decodes images itself (trainfast predict) uses to get the loader's pixels: it equals the
 * loader's own draw (augment.h) for FL_AUG_CENTER and FL_AUG_NONE over many source and output
 * sizes; fl_decode_crop_resize over it gives exactly the loader's batch images (JPEG records of
 * varying size); the random augmentations, flip and zero sizes are refused. */
#include <string.h>

#include "augment.h"
#include "fixture.h"
#include "fl_image.h"

/* the crop over a grid of sizes equals fl_augment_params with the loader's configuration */
static void grid(fl_augment aug, float ratio)
{
    fl_loader_options o;
    fl_loader_options_init(&o);
    o.augment = aug;
    o.center_ratio = ratio;
    static const uint32_t sizes[] = {1, 2, 3, 7, 16, 24, 31, 224, 225, 500, 4001};
    int n = 0;
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
        for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b++)
            for (size_t c = 0; c < 4; c++) {
                o.out_width = sizes[(a + c) % 11];
                o.out_height = sizes[(b + 2 * c) % 11];
                uint32_t W = sizes[a], H = sizes[b];
                fl_rect got;
                fl_error err;
                CHECK_OK(fl_loader_eval_crop(&o, W, H, &got, &err), &err);
                fl_aug_config cfg = {.augment = aug,
                                     .center_ratio = ratio,
                                     .out_width = o.out_width,
                                     .out_height = o.out_height,
                                     .seed = o.seed};
                fl_aug_params ap;
                fl_augment_params(&cfg, 0, 0, W, H, &ap);
                CHECK(!memcmp(&got, &ap.crop, sizeof got));
                CHECK(got.width >= 1 && got.height >= 1);
                CHECK(got.x + got.width <= W && got.y + got.height <= H);
                n++;
            }
    printf("augment %d, center_ratio %g: %d crops equal the loader's draw\n", (int)aug, ratio, n);
}

static void refused(void)
{
    fl_loader_options o;
    fl_loader_options_init(&o);
    o.out_width = o.out_height = 8;
    fl_rect r;
    fl_error err;
    o.augment = FL_AUG_RRC;
    CHECK(fl_loader_eval_crop(&o, 10, 10, &r, &err) == FL_E_INVALID);
    o.augment = FL_AUG_OBJECT_CROP;
    CHECK(fl_loader_eval_crop(&o, 10, 10, &r, &err) == FL_E_INVALID);
    o.augment = FL_AUG_CENTER;
    o.flip = 1;
    CHECK(fl_loader_eval_crop(&o, 10, 10, &r, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "flip"));
    o.flip = 0;
    CHECK(fl_loader_eval_crop(&o, 0, 10, &r, &err) == FL_E_INVALID);
    CHECK(fl_loader_eval_crop(&o, 10, 0, &r, NULL) == FL_E_INVALID);
    o.out_width = 0;
    CHECK(fl_loader_eval_crop(&o, 10, 10, &r, &err) == FL_E_INVALID);
    o.out_width = 8;
    o.center_ratio = 0;
    CHECK(fl_loader_eval_crop(&o, 10, 10, &r, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "center_ratio"));
    o.center_ratio = 1.5f;
    CHECK(fl_loader_eval_crop(&o, 10, 10, &r, &err) == FL_E_INVALID);
}

/* the loader's batch images equal fl_decode_crop_resize over the public crop */
static void batches(const char *path, fl_augment aug)
{
    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 4;
    o.order = FL_ORDER_SEQUENTIAL;
    o.augment = aug;
    o.out_height = 20;
    o.out_width = 28;
    fl_loader *L;
    fl_error err;
    CHECK_OK(fl_loader_create(path, &o, &L, &err), &err);
    const fl_dataset *ds = fl_loader_dataset(L);
    fl_decoder *d;
    CHECK_OK(fl_decoder_create(0, &d, &err), &err);
    size_t ob = (size_t)o.out_height * o.out_width * 3;
    uint8_t *ref = malloc(ob);
    int n = 0;
    for (int bi = 0; bi < 4; bi++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        for (uint32_t k = 0; k < b->size; k++) {
            const uint8_t *data;
            size_t len;
            CHECK_OK(fl_dataset_get(ds, b->indices[k], &data, &len, 1, &err), &err);
            fl_image_info ii;
            CHECK_OK(fl_image_probe(data, len, &ii, &err), &err);
            fl_rect crop;
            CHECK_OK(fl_loader_eval_crop(&o, ii.width, ii.height, &crop, &err), &err);
            CHECK_OK(fl_decode_crop_resize(d, data, len, &crop, o.out_width, o.out_height, 3, 0,
                                           ref, &err),
                     &err);
            CHECK(memcmp(ref, b->images + k * ob, ob) == 0);
            n++;
        }
        fl_loader_release(L, b);
    }
    printf("augment %d: %d JPEG samples of varying size equal the loader's\n", (int)aug, n);
    free(ref);
    fl_decoder_free(d);
    fl_loader_close(L);
}

int main(void)
{
    grid(FL_AUG_CENTER, 0.875f);
    grid(FL_AUG_CENTER, 1.0f);
    grid(FL_AUG_CENTER, 0.3f);
    grid(FL_AUG_NONE, 0.875f);
    refused();
    char *dir = fx_tmpdir("evalcrop");
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
    char *p = fx_make(dir, "jpeg", &j);
    batches(p, FL_AUG_CENTER);
    batches(p, FL_AUG_NONE);
    free(p);
    fx_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
