/* make_dataset.c — fixture maker for the Python binding and CLI tests: writes a small raw uint8
 * dataset whose pixels are a known formula of (record, y, x, channel), optionally flipping one
 * byte of a record afterwards to make a corrupt copy.
 * usage: fl_py_make_dataset DST [--count N] [--height H] [--width W] [--classes K]
 *        [--zstd] [--lmdb] [--shard-bytes B] [--corrupt RECORD]
 * Pixel (i, y, x, c) = (i*7 + y*13 + x*29 + c*71) mod 256; label = i mod K; classes "class0".. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fl_dataset.h"
#include "fl_writer.h"

static int flip_byte(const char *dst, uint64_t rec)
{
    fl_error err = {0};
    fl_dataset *ds = NULL;
    if (fl_dataset_open(dst, &ds, &err)) {
        fprintf(stderr, "make_dataset: %s\n", err.msg);
        return 1;
    }
    fl_record_info ri;
    if (fl_dataset_record_info(ds, rec, &ri, &err)) {
        fprintf(stderr, "make_dataset: %s\n", err.msg);
        fl_dataset_close(ds);
        return 1;
    }
    const char *path = fl_dataset_shard_path(ds, ri.shard);
    char p[4096];
    snprintf(p, sizeof p, "%s", path ? path : "");
    uint64_t off = ri.offset + ri.stored_len / 2;
    fl_dataset_close(ds);
    int fd = open(p, O_RDWR);
    uint8_t b;
    if (fd < 0 || pread(fd, &b, 1, (off_t)off) != 1) {
        fprintf(stderr, "make_dataset: %s: %s\n", p, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1;
    }
    b ^= 0x5a;
    int ok = pwrite(fd, &b, 1, (off_t)off) == 1;
    close(fd);
    if (!ok) {
        fprintf(stderr, "make_dataset: %s: write failed\n", p);
        return 1;
    }
    printf("%s %llu\n", p, (unsigned long long)off);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s DST [--count N] [--height H] [--width W] [--classes K] [--zstd] "
                "[--lmdb] [--shard-bytes B] [--corrupt RECORD]\n",
                argv[0]);
        return 2;
    }
    const char *dst = argv[1];
    unsigned count = 100, h = 6, w = 8, k = 4;
    unsigned long long shard_bytes = 4096;
    long corrupt = -1;
    int zstd = 0, lmdb = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
        if (!strcmp(a, "--count"))
            count = (unsigned)atoi(v), i++;
        else if (!strcmp(a, "--height"))
            h = (unsigned)atoi(v), i++;
        else if (!strcmp(a, "--width"))
            w = (unsigned)atoi(v), i++;
        else if (!strcmp(a, "--classes"))
            k = (unsigned)atoi(v), i++;
        else if (!strcmp(a, "--shard-bytes"))
            shard_bytes = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--corrupt"))
            corrupt = atol(v), i++;
        else if (!strcmp(a, "--zstd"))
            zstd = 1;
        else if (!strcmp(a, "--lmdb"))
            lmdb = 1;
        else {
            fprintf(stderr, "make_dataset: unknown option %s\n", a);
            return 2;
        }
    }
    if (corrupt >= 0)
        return flip_byte(dst, (uint64_t)corrupt);
    if (!count || !h || !w || !k || k > 1000)
        return 2;

    fl_writer_options o;
    memset(&o, 0, sizeof o);
    o.backend = lmdb ? FL_BACKEND_LMDB : FL_BACKEND_SHARDS;
    o.schema.encoding = FL_ENC_RAW;
    o.schema.compression = zstd ? FL_COMP_ZSTD : FL_COMP_NONE;
    o.schema.channels = 3;
    o.schema.height = h;
    o.schema.width = w;
    o.zstd_level = 3;
    o.shard_bytes = shard_bytes;
    o.tool_version = "test";
    fl_error err = {0};
    fl_writer *wr = NULL;
    if (fl_writer_open(dst, &o, &wr, &err)) {
        fprintf(stderr, "make_dataset: %s\n", err.msg);
        return 1;
    }
    size_t n = (size_t)h * w * 3;
    uint8_t *px = malloc(n);
    if (!px)
        return 1;
    for (unsigned i = 0; i < count; i++) {
        for (unsigned y = 0; y < h; y++)
            for (unsigned x = 0; x < w; x++)
                for (unsigned c = 0; c < 3; c++)
                    px[((size_t)y * w + x) * 3 + c] =
                        (uint8_t)((i * 7 + y * 13 + x * 29 + c * 71) & 255);
        char name[64];
        snprintf(name, sizeof name, "rec%05u.raw", i);
        if (fl_writer_add(wr, px, n, (int32_t)(i % k), name, h, w, &err)) {
            fprintf(stderr, "make_dataset: %s\n", err.msg);
            fl_writer_abort(wr);
            free(px);
            return 1;
        }
    }
    free(px);
    char **names = calloc(k, sizeof *names);
    char *store = calloc(k, 16);
    for (unsigned c = 0; c < k; c++) {
        names[c] = store + 16 * c;
        snprintf(names[c], 16, "class%u", c);
    }
    int rc = fl_writer_finish(wr, (const char *const *)names, k, &err);
    free(names);
    free(store);
    if (rc) {
        fprintf(stderr, "make_dataset: %s\n", err.msg);
        return 1;
    }
    return 0;
}
