/* dump_pixels.c — test helper: the pixels `trainfast eval` feeds a model, in record order, as
 * .npy files another runtime (ONNX Runtime) can read: uint8 [N, H, W, C] (NHWC, as the loader
 * gives them) and int32 labels [N]. Same loader options as tf_evaluate (train_eval.c):
 * sequential order, no augmentation; data sets of varying image size are centre-cropped to SIZE.
 * usage: tf_dump_pixels DATA SIZE PIXELS.npy LABELS.npy [LIMIT]   (SIZE 0: fixed-size data) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastload.h"

/* a version 1.0 .npy header for a C-order array of `descr` and shape dims[nd] */
static int npy_header(FILE *f, const char *descr, const uint64_t *dims, int nd)
{
    char shape[128] = "";
    size_t o = 0;
    for (int i = 0; i < nd; i++)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%llu,%s", (unsigned long long)dims[i],
                              i + 1 < nd ? " " : "");
    if (nd > 1)
        shape[o - 1] = 0; /* "(3, 4)" not "(3, 4,)"; a 1-d shape keeps its comma: "(3,)" */
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr, shape);
    size_t total = 10 + (size_t)n + 1, pad = (64 - total % 64) % 64;
    unsigned hl = (unsigned)(n + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, hl & 0xff, hl >> 8};
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(dict, 1, (size_t)n, f) != (size_t)n)
        return -1;
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    return fputc('\n', f) == EOF ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: tf_dump_pixels DATA SIZE PIXELS.npy LABELS.npy [LIMIT]\n");
        return 2;
    }
    uint32_t size = (uint32_t)atoi(argv[2]);
    uint64_t limit = argc == 6 ? strtoull(argv[5], NULL, 10) : UINT64_MAX;
    fl_loader_options lo;
    fl_loader_options_init(&lo);
    lo.batch_size = 256;
    lo.workers = 1;
    lo.order = FL_ORDER_SEQUENTIAL;
    lo.drop_last = 0;
    if (size) {
        lo.out_height = lo.out_width = size;
        lo.augment = FL_AUG_CENTER;
    }
    fl_error err;
    fl_loader *L;
    if (fl_loader_create(argv[1], &lo, &L, &err)) {
        fprintf(stderr, "tf_dump_pixels: %s\n", err.msg);
        return 1;
    }
    uint64_t count = fl_dataset_count(fl_loader_dataset(L));
    if (count > limit)
        count = limit;
    FILE *fp = fopen(argv[3], "wb"), *fl = fopen(argv[4], "wb");
    int rc = fp && fl ? 0 : 1;
    uint64_t seen = 0;
    for (int first = 1; !rc && seen < count; first = 0) {
        fl_batch *b;
        if (fl_loader_next(L, &b, &err)) {
            fprintf(stderr, "tf_dump_pixels: %s\n", err.msg);
            rc = 1;
            break;
        }
        if (first) {
            uint64_t d4[4] = {count, b->height, b->width, b->channels}, d1[1] = {count};
            rc |= npy_header(fp, "|u1", d4, 4) | npy_header(fl, "<i4", d1, 1);
        }
        uint64_t n = b->size < count - seen ? b->size : count - seen;
        size_t px = (size_t)b->height * b->width * b->channels;
        if (fwrite(b->images, px, n, fp) != n || fwrite(b->labels, 4, n, fl) != n)
            rc = 1;
        seen += n;
        fl_loader_release(L, b);
    }
    fl_loader_close(L);
    if ((fp && fclose(fp)) || (fl && fclose(fl)) || rc) {
        fprintf(stderr, "tf_dump_pixels: cannot write %s / %s\n", argv[3], argv[4]);
        return 1;
    }
    printf("%llu records\n", (unsigned long long)seen);
    return 0;
}
