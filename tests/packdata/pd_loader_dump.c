/* pd_loader_dump.c — what libfastload delivers for a packed dataset, for the packdata tests to
 * compare with a reference decoder: one epoch in dataset order, no augmentation, batches of one,
 * each sample written to OUTDIR/<index>.rgb (out_h x out_w x 3 bytes) and its source name to
 * OUTDIR/names.txt ("index<TAB>name<TAB>label" lines).
 *   pd_loader_dump DST OUT_H OUT_W OUTDIR [uring|pread|mmap]
 * Exit 0 ok, 1 on any loader error (printed). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastload.h"

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: pd_loader_dump DST OUT_H OUT_W OUTDIR [uring|pread|mmap]\n");
        return 2;
    }
    fl_loader_options o;
    fl_loader_options_init(&o);
    o.batch_size = 1;
    o.workers = 2;
    o.out_height = (uint32_t)atoi(argv[2]);
    o.out_width = (uint32_t)atoi(argv[3]);
    o.channels = 3;
    o.augment = FL_AUG_NONE;
    o.order = FL_ORDER_SEQUENTIAL;
    o.pinned = 0;
    o.drop_last = 1;
    if (argc > 5) {
        if (!strcmp(argv[5], "uring"))
            o.io = FL_IO_URING;
        else if (!strcmp(argv[5], "pread"))
            o.io = FL_IO_PREAD;
        else if (!strcmp(argv[5], "mmap"))
            o.io = FL_IO_MMAP;
    }
    fl_loader *L;
    fl_error err;
    if (fl_loader_create(argv[1], &o, &L, &err)) {
        fprintf(stderr, "pd_loader_dump: %s\n", err.msg);
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/names.txt", argv[4]);
    FILE *names = fopen(path, "w");
    if (!names) {
        perror(path);
        fl_loader_close(L);
        return 1;
    }
    const fl_dataset *ds = fl_loader_dataset(L);
    uint64_t n = fl_loader_batches_per_epoch(L);
    int rc = 0;
    for (uint64_t b = 0; b < n && !rc; b++) {
        fl_batch *bt;
        if (fl_loader_next(L, &bt, &err)) {
            fprintf(stderr, "pd_loader_dump: batch %" PRIu64 ": %s\n", b, err.msg);
            rc = 1;
            break;
        }
        uint64_t idx = bt->indices[0];
        size_t nl;
        const char *nm = fl_dataset_record_name(ds, idx, &nl);
        fprintf(names, "%" PRIu64 "\t%.*s\t%d\n", idx, (int)nl, nm ? nm : "", bt->labels[0]);
        snprintf(path, sizeof path, "%s/%" PRIu64 ".rgb", argv[4], idx);
        FILE *f = fopen(path, "wb");
        size_t bytes = (size_t)bt->height * bt->width * bt->channels;
        if (!f || fwrite(bt->images, 1, bytes, f) != bytes || fclose(f)) {
            perror(path);
            rc = 1;
        }
        fl_loader_release(L, bt);
    }
    if (fclose(names))
        rc = 1;
    fl_loader_close(L);
    return rc;
}
