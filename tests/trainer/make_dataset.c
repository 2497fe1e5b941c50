/* make_dataset.c — test fixture: write a small synthetic raw-uint8 dataset with fl_writer.
 * Class k draws a bright horizontal band at row band k (plus noise), so the task is learnable.
 * usage: make_dataset DST COUNT HEIGHT WIDTH CHANNELS CLASSES SEED [NAMES]
 * NAMES: comma-separated class names in label order (default class0,class1,...). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_writer.h"

int main(int argc, char **argv)
{
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: make_dataset DST COUNT H W C CLASSES SEED [NAMES]\n");
        return 2;
    }
    const char *dst = argv[1];
    long n = atol(argv[2]), h = atol(argv[3]), w = atol(argv[4]), c = atol(argv[5]),
         k = atol(argv[6]);
    unsigned long long s = strtoull(argv[7], NULL, 10) * 2654435761ull + 1;
    if (n < 1 || h < 1 || w < 1 || (c != 1 && c != 3) || k < 2 || k > h) {
        fprintf(stderr, "make_dataset: bad arguments\n");
        return 2;
    }
    fl_writer_options o;
    memset(&o, 0, sizeof o);
    o.backend = FL_BACKEND_SHARDS;
    o.schema.encoding = FL_ENC_RAW;
    o.schema.compression = FL_COMP_NONE;
    o.schema.channels = (uint32_t)c;
    o.schema.height = (uint32_t)h;
    o.schema.width = (uint32_t)w;
    o.shard_bytes = 1 << 20;
    o.tool_version = "make_dataset";
    o.overwrite = 1;
    fl_writer *wr;
    fl_error err;
    if (fl_writer_open(dst, &o, &wr, &err)) {
        fprintf(stderr, "make_dataset: %s\n", err.msg);
        return 1;
    }
    uint8_t *img = malloc((size_t)(h * w * c));
    for (long i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int label = (int)((s >> 33) % (unsigned long long)k);
        long band = h / k;
        for (long y = 0; y < h; y++)
            for (long x = 0; x < w * c; x++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                int on = y / band == label;
                img[y * w * c + x] = (uint8_t)((on ? 180 : 50) + (int)((s >> 40) % 50));
            }
        char name[32];
        snprintf(name, sizeof name, "synthetic#%ld", i);
        if (fl_writer_add(wr, img, (size_t)(h * w * c), label, name, (uint32_t)h, (uint32_t)w,
                          &err)) {
            fprintf(stderr, "make_dataset: %s\n", err.msg);
            fl_writer_abort(wr);
            return 1;
        }
    }
    free(img);
    const char *names[64];
    char buf[64][16];
    const char *given = argc == 9 ? argv[8] : NULL;
    for (long i = 0; i < k && i < 64; i++) {
        size_t len = given ? strcspn(given, ",") : 0;
        if (given && len) {
            snprintf(buf[i], sizeof buf[i], "%.*s", (int)len, given);
            given = given[len] ? given + len + 1 : NULL;
        } else {
            snprintf(buf[i], sizeof buf[i], "class%ld", i);
        }
        names[i] = buf[i];
    }
    if (fl_writer_finish(wr, names, (uint32_t)k, &err)) {
        fprintf(stderr, "make_dataset: %s\n", err.msg);
        return 1;
    }
    return 0;
}
