/* test_roundtrip.c — every encoding (JPEG bytes, PNG bytes, raw, raw+zstd with a trained
 * dictionary, JPEG+zstd) written and read back on one backend (argv[1]: shards|lmdb): exact bytes,
 * labels, names, class names, schema, manifest fields, verify clean. */
#include "fmt_test.h"

static void train_dict(const fl_writer_options *o, uint8_t *dict, size_t cap, size_t *len)
{
    enum { N = 400 };
    size_t sizes[N], total = 0;
    uint8_t *samples = malloc((size_t)N * 784);
    CHECK(samples);
    for (int i = 0; i < N; i++) {
        sizes[i] =
            tt_payload((uint64_t)i * 7 + 1000, o->schema.encoding, 28, 28, 1, samples + total, 784);
        total += sizes[i];
    }
    fl_error err;
    CHECK_OK(fl_zstd_train_dictionary(samples, sizes, N, dict, cap, len, &err), &err);
    CHECK(*len > 0 && *len <= cap);
    free(samples);
}

int main(int argc, char **argv)
{
    fl_backend backend = tt_backend_arg(argc, argv);
    struct {
        int enc, zstd, dict;
    } cases[] = {
        {FL_ENC_JPEG, 0, 0}, {FL_ENC_PNG, 0, 0}, {FL_ENC_RAW, 0, 0},
        {FL_ENC_RAW, 1, 1},  {FL_ENC_RAW, 1, 0}, {FL_ENC_JPEG, 1, 0},
    };
    const uint64_t n = 300;
    static uint8_t dict[16384];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fl_writer_options o = tt_options(backend, cases[c].enc, cases[c].zstd);
        size_t dict_len = 0;
        if (cases[c].dict) {
            train_dict(&o, dict, sizeof dict, &dict_len);
            o.zstd_dict = dict;
            o.zstd_dict_len = dict_len;
        }
        char name[64];
        snprintf(name, sizeof name, "ds%zu", c);
        const char *dst = tt_path(name);
        tt_write(dst, &o, n);
        struct stat st;
        char partial[PATH_MAX];
        snprintf(partial, sizeof partial, "%s.partial", dst);
        CHECK(stat(partial, &st) != 0); /* renamed into place */

        fl_dataset *ds;
        fl_error err;
        CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
        CHECK(fl_dataset_backend(ds) == backend);
        const fl_schema *s = fl_dataset_schema(ds);
        CHECK(s->encoding == (fl_encoding)cases[c].enc);
        CHECK(s->compression == (cases[c].zstd ? FL_COMP_ZSTD : FL_COMP_NONE));
        CHECK(s->channels == o.schema.channels && s->height == o.schema.height &&
              s->width == o.schema.width);
        tt_check_all(ds, n);
        CHECK(fl_dataset_num_shards(ds) >= 1);
        CHECK(fl_dataset_total_bytes(ds) > 0);
        const char *mj = fl_dataset_manifest_json(ds);
        CHECK(strstr(mj, "\"format\": \"fastload-dataset\""));
        CHECK(strstr(mj, "\"records\": 300"));
        CHECK(strstr(mj, "\"options\": {\"test\": true}"));
        CHECK(strstr(mj, "\"packdata_version\": \"test\""));
        CHECK(strstr(mj, "\"created\": \"20"));
        if (backend == FL_BACKEND_SHARDS) {
            fl_record_info info;
            CHECK_OK(fl_dataset_record_info(ds, 0, &info, &err), &err);
            CHECK(info.offset % 4096 == 0); /* records start 4 KiB-aligned after header + dict */
        }
        if (cases[c].zstd) {
            /* a too-small output buffer is refused, not overrun */
            const uint8_t *p, *pl;
            size_t len, pn;
            uint8_t small[8];
            CHECK_OK(fl_dataset_get(ds, 1, &p, &len, 1, &err), &err);
            CHECK(fl_dataset_payload(ds, 1, p, len, small, sizeof small, &pl, &pn, &err) ==
                  FL_E_RANGE);
        }
        fl_dataset_close(ds);
        printf("case %zu (%s%s%s, %s): ok\n", c,
               cases[c].enc == FL_ENC_RAW   ? "raw"
               : cases[c].enc == FL_ENC_PNG ? "png"
                                            : "jpeg",
               cases[c].zstd ? "+zstd" : "", cases[c].dict ? "+dict" : "",
               backend == FL_BACKEND_LMDB ? "lmdb" : "shards");
    }
    /* empty dataset */
    fl_writer_options o = tt_options(backend, FL_ENC_JPEG, 0);
    tt_write(tt_path("empty"), &o, 0);
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open(tt_path("empty"), &ds, &err), &err);
    CHECK(fl_dataset_count(ds) == 0);
    CHECK_OK(fl_dataset_verify(ds, NULL, NULL, NULL, &err), &err);
    fl_dataset_close(ds);
    return 0;
}
