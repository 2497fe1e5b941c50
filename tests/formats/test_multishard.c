/* test_multishard.c — many small shards (tiny shard_bytes): shard boundaries, per-shard headers
 * (first record, count), the manifest's shard list, 4 KiB-aligned data starts, a dictionary
 * repeated in every shard, and records spanning all shards read back exactly. Also LMDB map growth
 * from a 1 MiB map through several doublings. */
#include "fmt_test.h"
#include "fl_lmdb.h"
#include "fl_shard.h"

int main(void)
{
    fl_error err;
    /* JPEG-like records, ~1.5 KB each, 16 KiB shards */
    fl_writer_options o = tt_options(FL_BACKEND_SHARDS, FL_ENC_JPEG, 0);
    o.shard_bytes = 16384;
    const uint64_t n = 400;
    tt_write(tt_path("many"), &o, n);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(tt_path("many"), &ds, &err), &err);
    uint32_t ns = fl_dataset_num_shards(ds);
    printf("%llu records in %u shards\n", (unsigned long long)n, ns);
    CHECK(ns > 10);
    tt_check_all(ds, n);
    uint64_t sum = 0, prev_shard = 0;
    for (uint64_t i = 0; i < n; i++) {
        fl_record_info r;
        CHECK_OK(fl_dataset_record_info(ds, i, &r, &err), &err);
        CHECK(r.shard == prev_shard || r.shard == prev_shard + 1);
        prev_shard = r.shard;
    }
    CHECK(prev_shard == ns - 1);
    for (uint32_t s = 0; s < ns; s++) {
        fl_shard_view v;
        const char *p = fl_dataset_shard_path(ds, s);
        char want[64];
        snprintf(want, sizeof want, "/shard-%05u.fls", s);
        CHECK(strstr(p, want) != NULL);
        CHECK_OK(fl_shard_open(p, &v, &err), &err);
        CHECK(v.number == s && v.first_record == sum && v.count > 0);
        CHECK(v.data_offset == 4096 && v.dict == NULL);
        /* a shard is cut before it passes shard_bytes (unless one record alone is larger) */
        CHECK(v.data_end <= o.shard_bytes || v.count == 1);
        sum += v.count;
        fl_shard_close(&v);
    }
    CHECK(sum == n);
    CHECK(fl_dataset_shard_path(ds, ns) == NULL);
    fl_dataset_close(ds);

    /* raw + zstd with a dictionary: each shard carries it, data starts 4 KiB-aligned after it */
    o = tt_options(FL_BACKEND_SHARDS, FL_ENC_RAW, 1);
    uint8_t dict[6000];
    for (size_t i = 0; i < sizeof dict; i++)
        dict[i] = (uint8_t)(i * 7);
    /* a raw-content dictionary (no zstd dictionary header) is valid too */
    o.zstd_dict = dict;
    o.zstd_dict_len = sizeof dict;
    o.shard_bytes = 20000;
    tt_write(tt_path("dict"), &o, n);
    CHECK_OK(fl_dataset_open(tt_path("dict"), &ds, &err), &err);
    ns = fl_dataset_num_shards(ds);
    CHECK(ns > 2);
    tt_check_all(ds, n);
    for (uint32_t s = 0; s < ns; s++) {
        fl_shard_view v;
        CHECK_OK(fl_shard_open(fl_dataset_shard_path(ds, s), &v, &err), &err);
        CHECK(v.dict_len == sizeof dict && memcmp(v.dict, dict, sizeof dict) == 0);
        CHECK(v.data_offset == 12288); /* 4096 header + 6000 dict, rounded up to 4 KiB */
        fl_shard_close(&v);
    }
    fl_dataset_close(ds);

    /* LMDB map growth: 1 MiB map, ~6 MB of records */
    fl_lmdb_initial_mapsize = 1u << 20;
    o = tt_options(FL_BACKEND_LMDB, FL_ENC_PNG, 0);
    fl_writer *w;
    CHECK_OK(fl_writer_open(tt_path("lmdbgrow"), &o, &w, &err), &err);
    static uint8_t big[200000];
    for (int i = 0; i < 30; i++) {
        uint64_t s = (uint64_t)i + 1;
        for (size_t k = 0; k < sizeof big; k++)
            big[k] = (uint8_t)tt_rng(&s);
        char name[32];
        snprintf(name, sizeof name, "big%d", i);
        CHECK_OK(fl_writer_add(w, big, sizeof big, i % 3, name, 1, 1, &err), &err);
    }
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    CHECK_OK(fl_dataset_open(tt_path("lmdbgrow"), &ds, &err), &err);
    CHECK(fl_dataset_count(ds) == 30);
    CHECK(fl_dataset_total_bytes(ds) > 30 * sizeof big);
    for (int i = 0; i < 30; i++) {
        uint64_t s = (uint64_t)i + 1;
        for (size_t k = 0; k < sizeof big; k++)
            big[k] = (uint8_t)tt_rng(&s);
        const uint8_t *p;
        size_t len;
        CHECK_OK(fl_dataset_get(ds, (uint64_t)i, &p, &len, 1, &err), &err);
        CHECK(len == sizeof big && memcmp(p, big, len) == 0);
    }
    CHECK_OK(fl_dataset_verify(ds, NULL, NULL, NULL, &err), &err);
    fl_dataset_close(ds);
    printf("multishard ok\n");
    return 0;
}
