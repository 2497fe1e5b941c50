/* fl_make_scale_set.c — writes a data set of N records copied from a smaller one, for measuring
 * what the reader and the loader hold per record at ImageNet scale without packing a million
 * files: record i of DST is record floor(i * M / N) of SRC (M records), so DST keeps SRC's class
 * order and record sizes, each record N/M times. Names are "CLASS/CLASS_i.JPEG" (ImageNet's
 * length). SRC must be an uncompressed classic data set (e.g. `packdata pack --encode keep`).
 * --plain-index stores each shard's index block as is (packdata compresses it when that saves
 * space). Usage: fl_make_scale_set SRC DST N [--lmdb] [--zstd] [--plain-index] [--shard-bytes B];
 * exit 0, or 1 naming what failed (2: usage). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_dataset.h"
#include "fl_shard.h"
#include "fl_writer.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: fl_make_scale_set SRC DST N [--lmdb] [--zstd] [--plain-index] "
                        "[--shard-bytes B]\n");
        return 2;
    }
    unsigned long long n = strtoull(argv[3], NULL, 10), shard_bytes = 64ull << 20;
    int lmdb = 0, zstd = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--lmdb"))
            lmdb = 1;
        else if (!strcmp(argv[i], "--zstd"))
            zstd = 1;
        else if (!strcmp(argv[i], "--plain-index"))
            fl_shard_compress_index = 0;
        else if (!strcmp(argv[i], "--shard-bytes") && i + 1 < argc)
            shard_bytes = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "fl_make_scale_set: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    fl_error err;
    fl_error_clear(&err);
    fl_dataset *src = NULL;
    fl_writer *w = NULL;
    if (fl_dataset_open(argv[1], &src, &err))
        goto fail;
    const fl_schema *s = fl_dataset_schema(src);
    uint64_t m = fl_dataset_count(src);
    if (s->compression != FL_COMP_NONE || !m || !n) {
        fprintf(stderr, "fl_make_scale_set: %s: needs an uncompressed, non-empty set\n", argv[1]);
        return 1;
    }
    fl_writer_options o;
    memset(&o, 0, sizeof o);
    o.backend = lmdb ? FL_BACKEND_LMDB : FL_BACKEND_SHARDS;
    o.schema = *s;
    o.schema.compression = zstd ? FL_COMP_ZSTD : FL_COMP_NONE;
    o.zstd_level = 1;
    o.shard_bytes = shard_bytes;
    o.tool_version = "fl_make_scale_set";
    if (fl_writer_open(argv[2], &o, &w, &err))
        goto fail;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t j = (uint64_t)((unsigned __int128)i * m / n);
        fl_record_info ri;
        const uint8_t *p;
        size_t len;
        if (fl_dataset_record_info(src, j, &ri, &err) || fl_dataset_get(src, j, &p, &len, 0, &err))
            goto fail;
        const char *cls = fl_dataset_class_name(src, (uint32_t)ri.label);
        char name[512];
        snprintf(name, sizeof name, "%s/%s_%llu.JPEG", cls ? cls : "x", cls ? cls : "x",
                 (unsigned long long)i);
        if (fl_writer_add_as(w, ri.format, p, len - ri.fields_len, ri.label, name, ri.height,
                             ri.width, &err))
            goto fail;
    }
    uint32_t k = fl_dataset_num_classes(src);
    const char **cls = calloc(k ? k : 1, sizeof *cls);
    if (!cls)
        return 1;
    for (uint32_t c = 0; c < k; c++)
        cls[c] = fl_dataset_class_name(src, c);
    int rc = fl_writer_finish(w, cls, k, &err);
    w = NULL;
    free(cls);
    if (rc)
        goto fail;
    fl_dataset_close(src);
    return 0;
fail:
    fprintf(stderr, "fl_make_scale_set: %s\n", err.msg);
    if (w)
        fl_writer_abort(w);
    fl_dataset_close(src);
    return 1;
}
