/* fuzz_dataset.c — libFuzzer harness for the dataset reader: each input is tried (1) as a shard
 * file, beside a manifest made to match whatever its header claims (a version 3 header gets the
 * fields of V3_FIELDS, the schema of corpus/dataset/shard_v3_fields.fls), and (2) as
 * manifest.json, beside a valid shard; every dataset that opens is fully read (info, names,
 * CRC-checked get, decompression, every record's fields and ndarrays) and verified. Any crash,
 * leak or sanitizer report is a bug in formats/. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"

static char base[256];
static char shard_dir[300], manifest_dir[300];

static void cleanup(void)
{
    char p[400];
    const char *dirs[2] = {shard_dir, manifest_dir};
    const char *names[3] = {"shard-00000.fls", "manifest.json", "data.mdb"};
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "%s/%s", dirs[d], names[k]);
            unlink(p);
        }
        rmdir(dirs[d]);
    }
    snprintf(p, sizeof p, "%s/seed/shard-00000.fls", base);
    unlink(p);
    snprintf(p, sizeof p, "%s/seed/manifest.json", base);
    unlink(p);
    snprintf(p, sizeof p, "%s/seed", base);
    rmdir(p);
    rmdir(base);
}

static void exercise(const char *dir)
{
    fl_dataset *ds;
    fl_error err;
    if (fl_dataset_open(dir, &ds, &err) != 0) {
        if (!err.msg[0])
            abort(); /* every failure must say why */
        return;
    }
    uint64_t n = fl_dataset_count(ds);
    (void)fl_dataset_schema(ds);
    for (uint32_t c = 0; c <= fl_dataset_num_classes(ds); c++)
        (void)fl_dataset_class_name(ds, c);
    for (uint32_t s = 0; s <= fl_dataset_num_shards(ds); s++)
        (void)fl_dataset_shard_path(ds, s);
    (void)fl_dataset_total_bytes(ds);
    (void)strlen(fl_dataset_manifest_json(ds));
    size_t cap = fl_dataset_max_raw_len(ds);
    uint8_t *buf = cap <= (64u << 20) ? malloc(cap ? cap : 1) : NULL;
    for (uint64_t i = 0; i < n && i < 4096; i++) {
        fl_record_info info;
        if (fl_dataset_record_info(ds, i, &info, &err))
            abort();
        size_t nl;
        const char *nm = fl_dataset_record_name(ds, i, &nl);
        if (!nm && nl)
            abort();
        volatile uint8_t sink = 0;
        for (size_t k = 0; k < nl; k++)
            sink ^= (uint8_t)nm[k];
        const uint8_t *p, *pl;
        size_t len, pn;
        if (fl_dataset_get(ds, i, &p, &len, 0, &err))
            abort();
        for (size_t k = 0; k < len; k++)
            sink ^= p[k]; /* every byte must be mapped */
        (void)fl_dataset_check(ds, i, p, len, &err);
        if (buf && fl_dataset_payload(ds, i, p, len, buf, cap, &pl, &pn, &err) == 0 &&
            pn != info.raw_len && fl_dataset_schema(ds)->compression != FL_COMP_NONE)
            abort();
        fl_field_value vals[FL_MAX_FIELDS];
        const fl_field *fields = fl_dataset_fields(ds);
        if (fl_dataset_record_fields(ds, i, p, len, vals, &err) != 0) {
            if (!err.msg[0])
                abort();
            continue;
        }
        for (uint32_t f = 0; f < fl_dataset_num_fields(ds); f++) {
            for (size_t k = 0; k < vals[f].len; k++)
                sink ^= ((const uint8_t *)vals[f].data)[k];
            size_t nb = fl_field_ndarray_bytes(&fields[f]);
            if (fields[f].type != FL_FIELD_NDARRAY || nb > (16u << 20))
                continue;
            void *nd = malloc(nb ? nb : 1);
            (void)fl_dataset_ndarray(ds, f, &vals[f], nd, nb, &err);
            free(nd);
        }
    }
    free(buf);
    uint64_t bad;
    (void)fl_dataset_verify(ds, fuzz_no_stop, NULL, &bad, &err);
    fl_dataset_close(ds);
}

static void setup(void)
{
    fuzz_make_tmpdir(base, sizeof base, "dataset");
    snprintf(shard_dir, sizeof shard_dir, "%s/s", base);
    snprintf(manifest_dir, sizeof manifest_dir, "%s/m", base);
    mkdir(shard_dir, 0755);
    mkdir(manifest_dir, 0755);
    /* a valid one-shard dataset whose shard the manifest inputs will point at */
    char seed[300];
    snprintf(seed, sizeof seed, "%s/seed", base);
    fuzz_write_seed(seed, FL_BACKEND_SHARDS);
    char p[400];
    snprintf(p, sizeof p, "%s/shard-00000.fls", seed);
    FILE *f = fopen(p, "rb");
    if (!f)
        abort();
    static uint8_t sbuf[1 << 16];
    size_t n = fread(sbuf, 1, sizeof sbuf, f);
    fclose(f);
    /* a fixed dataset id (00 01 .. 0f) instead of the writer's random one, so manifest inputs
     * (corpus manifest_v2_matching_seed.json) can match the seed shard */
    if (n < 4096)
        abort();
    for (int k = 0; k < 16; k++)
        sbuf[104 + k] = (uint8_t)k;
    memset(sbuf + 16, 0, 4);
    uint32_t hcrc = fl_crc32c(0, sbuf, 4096);
    memcpy(sbuf + 16, &hcrc, 4);
    fuzz_put_file(manifest_dir, "shard-00000.fls", sbuf, n);
    atexit(cleanup);
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base[0])
        setup();
    /* (1) the input as a shard, with a manifest agreeing with its header */
    fuzz_put_file(shard_dir, "shard-00000.fls", data, size);
    static const char *enc[6] = {"jpeg", "jpeg", "png", "raw", "webp", "mixed"};
    uint32_t e = 1, c = 0, ch = 3, h = 0, wd = 0, ver = 2;
    /* the schema of the v3 seed (image, label, boxes, their classes, a caption, an ndarray) */
    static const char V3_FIELDS[] =
        ", \"fields\": [{\"name\": \"image\", \"type\": \"image\"}, {\"name\": \"label\", "
        "\"type\": \"int\"}, "
        "{\"name\": \"boxes\", \"type\": \"boxes\", \"max_count\": 1000}, {\"name\": \"labels\", "
        "\"type\": \"int_list\", \"of\": \"boxes\", \"max_count\": 1000}, {\"name\": \"caption\", "
        "\"type\": \"text\", \"max_count\": 100000}, {\"name\": \"depth\", \"type\": \"ndarray\", "
        "\"dtype\": \"uint16\", \"shape\": [2, 3]}]";
    uint64_t count = 0;
    char id[33] = "000102030405060708090a0b0c0d0e0f";
    if (size >= 120) {
        ver = rd32(data + 8) == 1   ? 1
              : rd32(data + 8) == 3 ? 3
                                    : 2; /* the manifest claims the
                                             shard's version and id */
        for (int k = 0; k < 16; k++)
            snprintf(id + 2 * k, 3, "%02x", data[104 + k]);
    }
    if (size >= 104) {
        e = rd32(data + 20) % 6;
        c = rd32(data + 24) & 1;
        ch = rd32(data + 28) % 5;
        h = rd32(data + 32) % 4096;
        wd = rd32(data + 36) % 4096;
        count = rd64(data + 56) % 1000000;
    }
    char man[2048];
    int mn = snprintf(
        man, sizeof man,
        "{\"format\": \"fastload-dataset\", \"format_version\": %u, \"dataset_id\": \"%s\", "
        "\"backend\": \"shards\", "
        "\"records\": %llu, \"classes\": [\"a\", \"b\", \"c\", \"d\"], \"schema\": "
        "{\"encoding\": \"%s\", \"compression\": \"%s\", \"channels\": %u, \"height\": %u, "
        "\"width\": %u}%s, \"shards\": [{\"file\": \"shard-00000.fls\", \"records\": %llu, "
        "\"bytes\": %zu}], \"options\": {}}",
        ver, id, (unsigned long long)count, enc[e], c ? "zstd" : "none", ch, h, wd,
        ver == 3 ? V3_FIELDS : "", (unsigned long long)count, size);
    fuzz_put_file(shard_dir, "manifest.json", man, (size_t)mn);
    exercise(shard_dir);
    /* (2) the input as a manifest, beside a valid shard */
    fuzz_put_file(manifest_dir, "manifest.json", data, size);
    exercise(manifest_dir);
    return 0;
}
