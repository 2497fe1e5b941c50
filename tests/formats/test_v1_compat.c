/* test_v1_compat.c — datasets written by format version 1 (committed under tests/formats/data/v1/,
 * made by the v1 writer with `test_v1_compat --generate DIR`) still open and read exactly as
 * before: every record's bytes, label, name and sizes; each record's format is the schema's
 * encoding. */
#include "fmt_test.h"

#define N 7

static const struct {
    const char *name;
    fl_backend backend;
    int encoding, zstd;
    uint64_t shard_bytes;
} fixtures[] = {
    {"shards-raw-zstd", FL_BACKEND_SHARDS, FL_ENC_RAW, 1,
     3000}, /* several shards, dictionary-less zstd */
    {"shards-jpeg", FL_BACKEND_SHARDS, FL_ENC_JPEG, 0, 0},
    {"shards-png-zstd", FL_BACKEND_SHARDS, FL_ENC_PNG, 1, 0},
    {"lmdb-raw-zstd", FL_BACKEND_LMDB, FL_ENC_RAW, 1, 0},
    {"lmdb-jpeg", FL_BACKEND_LMDB, FL_ENC_JPEG, 0, 0},
};

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--generate")) {
        for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
            char dst[PATH_MAX];
            snprintf(dst, sizeof dst, "%s/%s", argv[2], fixtures[f].name);
            fl_writer_options o =
                tt_options(fixtures[f].backend, fixtures[f].encoding, fixtures[f].zstd);
            o.shard_bytes = fixtures[f].shard_bytes;
            o.options_json = "{}";
            tt_write(dst, &o, N);
        }
        return 0;
    }
    const char *src = getenv("FL_SOURCE_DIR");
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%s/tests/formats/data/v1", src && *src ? src : ".");
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        char dir[PATH_MAX + 64];
        snprintf(dir, sizeof dir, "%s/%s", base, fixtures[f].name);
        fl_dataset *ds;
        fl_error err;
        CHECK_OK(fl_dataset_open(dir, &ds, &err), &err);
        CHECK(fl_dataset_backend(ds) == fixtures[f].backend);
        CHECK(fl_dataset_schema(ds)->encoding == (fl_encoding)fixtures[f].encoding);
        CHECK(strstr(fl_dataset_manifest_json(ds), "\"format_version\": 1") != NULL);
        tt_check_all(ds, N);
        uint8_t id[16];
        CHECK(fl_dataset_id(ds, id) == -ENOENT);
        for (uint64_t i = 0; i < N; i++) {
            fl_record_info info;
            CHECK_OK(fl_dataset_record_info(ds, i, &info, &err), &err);
            CHECK(info.format == (fl_encoding)fixtures[f].encoding);
        }
        if (fixtures[f].shard_bytes)
            CHECK(fl_dataset_num_shards(ds) > 1);
        fl_dataset_close(ds);
        printf("%s: ok\n", fixtures[f].name);
    }
    return 0;
}
