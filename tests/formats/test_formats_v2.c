/* test_formats_v2.c — per-record formats (format version 2): a mixed dataset keeps each record's
 * format (JPEG, PNG, WebP) and reads it back in fl_record_info.format, with both backends and
 * with and without zstd, also through fl_writer_add_stored_as; refusals (a raw or mixed record in
 * a mixed dataset, fl_writer_add without a format in a mixed dataset, a PNG record in a JPEG
 * dataset) leave the writer usable; a WebP dataset; the manifest carries the dataset id. */
#include "fmt_test.h"

static const fl_encoding fmts[3] = {FL_ENC_JPEG, FL_ENC_PNG, FL_ENC_WEBP};

static void run(fl_backend b, int zstd)
{
    char name[64];
    snprintf(name, sizeof name, "mixed-%d-%d", (int)b, zstd);
    const char *dst = tt_path(name);
    fl_writer_options o = tt_options(b, FL_ENC_MIXED, zstd);
    o.shard_bytes = 9000;
    fl_writer *w;
    fl_error err;
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    uint8_t buf[4096];
    const int n = 30;
    for (int i = 0; i < n; i++) {
        size_t len = tt_payload((uint64_t)i, FL_ENC_JPEG, 0, 0, 3, buf, sizeof buf);
        char nm[32];
        snprintf(nm, sizeof nm, "r%d", i);
        if (i == 7) { /* refusals in the middle leave the writer usable */
            CHECK(fl_writer_add_as(w, FL_ENC_RAW, buf, 12, 0, "raw", 2, 2, &err) == FL_E_INVALID);
            CHECK(strstr(err.msg, "mixed") != NULL);
            CHECK(fl_writer_add_as(w, FL_ENC_MIXED, buf, len, 0, "m", 2, 2, &err) == FL_E_INVALID);
            CHECK(fl_writer_add_as(w, (fl_encoding)77, buf, len, 0, "u", 2, 2, &err) ==
                  FL_E_INVALID);
            CHECK(fl_writer_add(w, buf, len, 0, "plain", 2, 2, &err) == FL_E_INVALID);
        }
        if (i % 5 == 4 && !zstd) /* stored bytes given directly (uncompressed: stored == raw) */
            CHECK_OK(fl_writer_add_stored_as(w, fmts[i % 3], buf, len, len, tt_label((uint64_t)i),
                                             nm, 10 + (uint32_t)i, 20, &err),
                     &err);
        else
            CHECK_OK(fl_writer_add_as(w, fmts[i % 3], buf, len, tt_label((uint64_t)i), nm,
                                      10 + (uint32_t)i, 20, &err),
                     &err);
    }
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    CHECK(fl_dataset_count(ds) == (uint64_t)n);
    CHECK(fl_dataset_schema(ds)->encoding == FL_ENC_MIXED);
    CHECK(strstr(fl_dataset_manifest_json(ds), "\"encoding\": \"mixed\"") != NULL);
    CHECK(strstr(fl_dataset_manifest_json(ds), "\"format_version\": 2") != NULL);
    CHECK(strstr(fl_dataset_manifest_json(ds), "\"dataset_id\": \"") != NULL);
    if (b == FL_BACKEND_SHARDS)
        CHECK(fl_dataset_num_shards(ds) > 1);
    uint8_t id[16], zero[16] = {0};
    CHECK(fl_dataset_id(ds, id) == 0 && memcmp(id, zero, 16) != 0);
    uint8_t *dstbuf = malloc(fl_dataset_max_raw_len(ds) + 1);
    for (int i = 0; i < n; i++) {
        fl_record_info info;
        CHECK_OK(fl_dataset_record_info(ds, (uint64_t)i, &info, &err), &err);
        CHECK(info.format == fmts[i % 3]);
        CHECK(info.height == 10 + (uint32_t)i && info.width == 20);
        const uint8_t *p, *pl;
        size_t len, pn;
        CHECK_OK(fl_dataset_get(ds, (uint64_t)i, &p, &len, 1, &err), &err);
        CHECK_OK(fl_dataset_payload(ds, (uint64_t)i, p, len, dstbuf, fl_dataset_max_raw_len(ds),
                                    &pl, &pn, &err),
                 &err);
        size_t wl = tt_payload((uint64_t)i, FL_ENC_JPEG, 0, 0, 3, buf, sizeof buf);
        CHECK(pn == wl && memcmp(pl, buf, wl) == 0);
    }
    free(dstbuf);
    uint64_t bad = 1;
    CHECK_OK(fl_dataset_verify(ds, NULL, NULL, &bad, &err), &err);
    CHECK(bad == 0);
    fl_dataset_close(ds);
    printf("%s: ok\n", name);
}

int main(void)
{
    run(FL_BACKEND_SHARDS, 0);
    run(FL_BACKEND_SHARDS, 1);
    run(FL_BACKEND_LMDB, 0);
    run(FL_BACKEND_LMDB, 1);
    /* a single-format dataset takes only its own format */
    fl_writer_options o = tt_options(FL_BACKEND_SHARDS, FL_ENC_JPEG, 0);
    fl_writer *w;
    fl_error err;
    const char *dst = tt_path("jpeg");
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    CHECK(fl_writer_add_as(w, FL_ENC_PNG, "\x89PNG", 4, 0, "p", 1, 1, &err) == FL_E_INVALID);
    CHECK(strstr(err.msg, "png record in a jpeg dataset") != NULL);
    CHECK_OK(fl_writer_add_as(w, FL_ENC_JPEG, "\xff\xd8xx", 4, 0, "j", 1, 1, &err), &err);
    CHECK_OK(fl_writer_add(w, "\xff\xd8yy", 4, 1, "k", 1, 1, &err), &err);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    fl_record_info info;
    CHECK_OK(fl_dataset_record_info(ds, 1, &info, &err), &err);
    CHECK(info.format == FL_ENC_JPEG);
    fl_dataset_close(ds);
    /* a WebP dataset */
    o = tt_options(FL_BACKEND_LMDB, FL_ENC_WEBP, 1);
    dst = tt_path("webp");
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    CHECK_OK(fl_writer_add(w, "RIFF....WEBP", 12, 2, "w", 3, 4, &err), &err);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    CHECK_OK(fl_dataset_record_info(ds, 0, &info, &err), &err);
    CHECK(info.format == FL_ENC_WEBP && fl_dataset_schema(ds)->encoding == FL_ENC_WEBP);
    fl_dataset_close(ds);
    printf("single-format: ok\n");
    return 0;
}
