/* test_classic_identity.c — a classification dataset written by this writer is byte for byte the
 * one the writer wrote before record fields existed (format version 2): the same fixture records,
 * packed with FL_DATASET_ID fixed, through fl_writer_add, fl_writer_add_stored, and the new
 * fl_writer_add_record with classic fields, give every data file and the manifest (its "created"
 * line aside; LMDB: every record as read back, and data.mdb's size) with the CRC32C and size
 * recorded from the pre-fields writer (built from the tree at 21f2e23 with -DFL_PRINT_DIGESTS: this
 * very file prints them). Shards (raw zstd with a dictionary, JPEG plain) and LMDB. */
#include "fl_lmdb.h"
#include "fmt_test.h"

typedef struct digest {
    uint32_t crc;
    uint64_t bytes;
} digest;

/* LMDB pages are not the same bytes from run to run (with any writer): for data.mdb, its size and
 * every record as the reader gives it (label, CRC, sizes, format, name, stored bytes). */
static void lmdb_records_digest(const char *dir, digest *d)
{
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open(dir, &ds, &err), &err);
    for (uint64_t i = 0; i < fl_dataset_count(ds); i++) {
        fl_record_info r;
        CHECK_OK(fl_dataset_record_info(ds, i, &r, &err), &err);
        uint32_t f[7] = {(uint32_t)r.label, r.crc32c,           r.raw_len,   r.height,
                         r.width,           (uint32_t)r.format, r.stored_len};
        d->crc = fl_crc32c(d->crc, f, sizeof f);
        size_t nl;
        const char *nm = fl_dataset_record_name(ds, i, &nl);
        d->crc = fl_crc32c(d->crc, nm, nl);
        const uint8_t *p;
        size_t len;
        CHECK_OK(fl_dataset_get(ds, i, &p, &len, 1, &err), &err);
        d->crc = fl_crc32c(d->crc, p, len);
    }
    fl_dataset_close(ds);
}

/* CRC32C and size of every file of a dataset directory, in name order, the manifest's "created"
 * line left out (data.mdb: lmdb_records_digest). */
static digest dir_digest(const char *dir)
{
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    CHECK(n > 0);
    digest d = {0, 0};
    for (int i = 0; i < n; i++) {
        const char *nm = list[i]->d_name;
        if (nm[0] == '.') {
            free(list[i]);
            continue;
        }
        char p[PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        size_t n_read;
        char *buf = (char *)tt_slurp(p, &n_read);
        long len = (long)n_read;
        if (!strcmp(nm, "manifest.json")) {
            char *c = strstr(buf, "  \"created\": \"");
            CHECK(c);
            char *e = strchr(c, '\n');
            CHECK(e);
            memmove(c, e + 1, strlen(e + 1) + 1);
            len = (long)strlen(buf);
        }
        d.crc = fl_crc32c(d.crc, nm, strlen(nm));
        if (!strcmp(nm, "data.mdb"))
            lmdb_records_digest(dir, &d);
        else
            d.crc = fl_crc32c(d.crc, buf, (size_t)len);
        d.bytes += (uint64_t)len;
        free(buf);
        free(list[i]);
    }
    free(list);
    return d;
}

enum { N = 300 };
enum { VIA_ADD, VIA_STORED, VIA_RECORD };

static void pack(const char *dst, fl_backend backend, int encoding, int zstd, int via)
{
    fl_writer_options o = tt_options(backend, encoding, zstd);
    o.shard_bytes = 64 << 10; /* several shards */
    uint8_t dict[2048];
    for (size_t i = 0; i < sizeof dict; i++)
        dict[i] = (uint8_t)(i * 7 / 5);
    if (zstd) {
        o.zstd_dict = dict;
        o.zstd_dict_len = sizeof dict;
    }
#ifndef FL_PRINT_DIGESTS
    fl_field classic[2];
    fl_fields_classic(classic);
    if (via == VIA_RECORD) {
        o.fields = classic;
        o.num_fields = 2;
    }
#endif
    fl_writer *w;
    fl_error err;
    CHECK_OK(fl_writer_open(dst, &o, &w, &err), &err);
    static uint8_t buf[1 << 16], cbuf[1 << 17];
    fl_compressor *c = NULL;
    if (zstd)
        CHECK_OK(fl_compressor_create(o.zstd_level, dict, sizeof dict, &c, &err), &err);
    char name[128];
    for (uint64_t i = 0; i < N; i++) {
        size_t n = tt_payload(i, encoding, 28, 28, o.schema.channels, buf, sizeof buf);
        tt_name(i, name, sizeof name);
        uint32_t h = encoding == FL_ENC_RAW ? 28 : 10 + (uint32_t)(i % 5);
        uint32_t wd = encoding == FL_ENC_RAW ? 28 : 20 + (uint32_t)(i % 7);
        if (via == VIA_ADD) {
            CHECK_OK(fl_writer_add(w, buf, n, tt_label(i), name, h, wd, &err), &err);
            continue;
        }
        const void *st = buf;
        size_t sl = n;
        if (c) {
            CHECK_OK(fl_compressor_compress(c, buf, n, cbuf, sizeof cbuf, &sl, &err), &err);
            st = cbuf;
        }
#ifndef FL_PRINT_DIGESTS
        if (via == VIA_RECORD) {
            fl_record_in r = {.format = (fl_encoding)encoding,
                              .stored = st,
                              .stored_len = sl,
                              .raw_len = n,
                              .compressed = c != NULL,
                              .label = tt_label(i),
                              .name = name,
                              .height = h,
                              .width = wd};
            CHECK_OK(fl_writer_add_record(w, &r, &err), &err);
            continue;
        }
#endif
        CHECK_OK(fl_writer_add_stored(w, st, sl, n, tt_label(i), name, h, wd, &err), &err);
    }
    fl_compressor_free(c);
    CHECK_OK(fl_writer_finish(w, tt_classes, 3, &err), &err);
}

static const struct {
    const char *name;
    fl_backend backend;
    int encoding, zstd;
    int lmdb_index; /* fl_lmdb_write_index */
    digest want;    /* from the pre-fields writer */
} cases[] = {
    {"shards-raw-zstd", FL_BACKEND_SHARDS, FL_ENC_RAW, 1, 1, {0x6eb197c1u, 251768}},
    {"shards-jpeg", FL_BACKEND_SHARDS, FL_ENC_JPEG, 0, 1, {0x0bd1ecb7u, 518799}},
    {"lmdb-png-zstd", FL_BACKEND_LMDB, FL_ENC_PNG, 1, 0, {0x5868b3a2u, 762397}},
    /* the same records with the record index in meta: data.mdb 3 pages larger, so the
     * manifest's "bytes" differs; every record reads back the same (lmdb_records_digest) */
    {"lmdb-png-zstd-index", FL_BACKEND_LMDB, FL_ENC_PNG, 1, 1, {0x26fd0d93u, 774685}},
};

int main(void)
{
    setenv("FL_DATASET_ID", "00112233445566778899aabbccddeeff", 1);
    setenv("FL_WRITER_KEEP_CACHE", "1", 1);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int via = VIA_ADD; via <= VIA_RECORD; via++) {
#ifdef FL_PRINT_DIGESTS
            if (via == VIA_RECORD)
                continue;
#endif
            char dst[64];
            snprintf(dst, sizeof dst, "%s-%d", cases[k].name, via);
            fl_lmdb_write_index = cases[k].lmdb_index;
            pack(tt_path(dst), cases[k].backend, cases[k].encoding, cases[k].zstd, via);
            digest d = dir_digest(tt_path(dst));
#ifdef FL_PRINT_DIGESTS
            printf("%s via %d: {0x%08xu, %llu}\n", cases[k].name, via, d.crc,
                   (unsigned long long)d.bytes);
#else
            EXPECTF(
                d.crc == cases[k].want.crc && d.bytes == cases[k].want.bytes,
                "%s (via %d): crc 0x%08x, %llu bytes; the pre-fields writer: 0x%08x, %llu bytes",
                cases[k].name, via, d.crc, (unsigned long long)d.bytes, cases[k].want.crc,
                (unsigned long long)cases[k].want.bytes);
            fl_dataset *ds;
            fl_error err;
            CHECK_OK(fl_dataset_open(tt_path(dst), &ds, &err), &err);
            CHECK(fl_dataset_format_version(ds) == 2);
            CHECK(fl_dataset_num_fields(ds) == 2);
            CHECK(fl_fields_is_classic(fl_dataset_fields(ds), 2));
            tt_check_all(ds, N);
            fl_dataset_close(ds);
#endif
        }
    }
    /* read through the record index or by the walk, every record is the same */
    digest walked = {0, 0}, indexed = {0, 0};
    lmdb_records_digest(tt_path("lmdb-png-zstd-0"), &walked);
    lmdb_records_digest(tt_path("lmdb-png-zstd-index-0"), &indexed);
    CHECK(walked.crc == indexed.crc);
    fl_lmdb_write_index = 1;
    return fl_check_status();
}
