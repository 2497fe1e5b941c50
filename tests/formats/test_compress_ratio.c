/* test_compress_ratio.c — small raw records must really compress: synthetic Fashion-MNIST-like
 * 28x28 gray images (smooth textured blobs on a black background) packed as raw+zstd with a
 * dictionary trained on separate samples. Prints the ratio at several settings; requires the
 * default packdata setting (level 19 + dictionary) to reach <= 60% of the raw pixel bytes, and
 * every record to read back exactly. */
#include <math.h>

#include "fmt_test.h"

#define SIDE 28
#define PIX  (SIDE * SIDE)

static void make_image(uint64_t seed, uint8_t *img)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 7;
    double cx[3], cy[3], sx[3], sy[3], amp[3];
    int nb = 1 + (int)(tt_rng(&s) % 3);
    for (int b = 0; b < nb; b++) {
        cx[b] = 8 + (double)(tt_rng(&s) % 12);
        cy[b] = 6 + (double)(tt_rng(&s) % 16);
        sx[b] = 2.5 + (double)(tt_rng(&s) % 50) / 10.0;
        sy[b] = 3.0 + (double)(tt_rng(&s) % 60) / 10.0;
        amp[b] = 140 + (double)(tt_rng(&s) % 110);
    }
    for (int y = 0; y < SIDE; y++)
        for (int x = 0; x < SIDE; x++) {
            double v = 0;
            for (int b = 0; b < nb; b++) {
                double dx = (x - cx[b]) / sx[b], dy = (y - cy[b]) / sy[b];
                v += amp[b] * exp(-0.5 * (dx * dx + dy * dy));
            }
            if (v < 40) {
                v = 0; /* black background */
            } else {
                /* fabric texture: a weave pattern plus a little noise */
                v *= 0.85 + 0.15 * (((x + 2 * y) % 5) / 4.0);
                if (tt_rng(&s) % 4 == 0)
                    v += (double)(tt_rng(&s) % 5) - 2;
                if (v > 255)
                    v = 255;
                if (v < 0)
                    v = 0;
            }
            img[y * SIDE + x] = (uint8_t)v;
        }
}

/* Pack n images; returns stored record bytes / raw bytes, *files = all file bytes / raw bytes. */
static double pack_ratio(const char *name, int level, const void *dict, size_t dict_len, uint64_t n,
                         uint64_t first, double *files)
{
    fl_writer_options o = tt_options(FL_BACKEND_SHARDS, FL_ENC_RAW, 1);
    o.zstd_level = level;
    o.zstd_dict = dict;
    o.zstd_dict_len = dict_len;
    fl_writer *w;
    fl_error err;
    const char *dst = tt_path(name);
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    uint8_t img[PIX];
    for (uint64_t i = 0; i < n; i++) {
        make_image(first + i, img);
        char nm[64];
        snprintf(nm, sizeof nm, "train-images-idx3-ubyte#%llu", (unsigned long long)(first + i));
        CHECK_OK(fl_writer_add(w, img, PIX, (int32_t)(i % 3), nm, SIDE, SIDE, &err), &err);
    }
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    uint64_t stored = 0;
    uint8_t out[PIX];
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *p, *pl;
        size_t len, pn;
        CHECK_OK(fl_dataset_get(ds, i, &p, &len, 1, &err), &err);
        CHECK_OK(fl_dataset_payload(ds, i, p, len, out, sizeof out, &pl, &pn, &err), &err);
        make_image(first + i, img);
        CHECK(pn == PIX && memcmp(pl, img, PIX) == 0);
        stored += len;
    }
    uint64_t total = fl_dataset_total_bytes(ds);
    fl_dataset_close(ds);
    double r = (double)stored / (double)(n * PIX);
    if (files)
        *files = (double)total / (double)(n * PIX);
    printf("%-22s level %2d dict %5zu B: records %.1f%% of raw; dataset (with index, names, dict) "
           "%.1f%%\n",
           name, level, dict_len, 100 * r, 100.0 * (double)total / (double)(n * PIX));
    return r;
}

int main(void)
{
    enum { TRAIN = 3000, N = 3000 };
    uint8_t *samples = malloc((size_t)TRAIN * PIX);
    size_t *sizes = malloc(TRAIN * sizeof *sizes);
    CHECK(samples && sizes);
    for (int i = 0; i < TRAIN; i++) {
        make_image(1000000 + (uint64_t)i,
                   samples + (size_t)i * PIX); /* disjoint from the packed set */
        sizes[i] = PIX;
    }
    static uint8_t dict[32768];
    size_t dict_len;
    fl_error err;
    CHECK_OK(fl_zstd_train_dictionary(samples, sizes, TRAIN, dict, sizeof dict, &dict_len, &err),
             &err);
    size_t zeros = 0;
    for (size_t i = 0; i < (size_t)TRAIN * PIX; i++)
        zeros += samples[i] == 0;
    printf("synthetic images: %.0f%% background pixels (Fashion-MNIST: 50%%)\n",
           100.0 * (double)zeros / ((double)TRAIN * PIX));
    free(samples);
    free(sizes);
    pack_ratio("no dictionary", 19, NULL, 0, N, 0, NULL);
    pack_ratio("dictionary", 3, dict, dict_len, N, 0, NULL);
    double files;
    pack_ratio("dictionary (packdata)", 19, dict, dict_len, N, 0, &files);
    if (files > 0.60) {
        fprintf(
            stderr,
            "FAIL: raw+zstd+dictionary at level 19: dataset is %.1f%% of raw (target <= 60%%)\n",
            100 * files);
        return 1;
    }
    printf("compression ratio ok\n");
    return 0;
}
