/* test_corrupt.c — damaged datasets give clear errors naming the file (and record), never a crash:
 * a flipped payload byte (verify and get name the record; both backends), truncated shards, bad
 * magic, wrong version, damaged header / index / footer, index entries pointing outside the file,
 * and broken manifests (bad JSON, version, unsafe shard names, counts, missing shard). */
#define _GNU_SOURCE
#include "fmt_test.h"
#include "fl_shard.h"

static uint8_t *slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    CHECK(b && fread(b, 1, (size_t)sz, f) == (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static void spit(const char *p, const void *b, size_t n) {
    FILE *f = fopen(p, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    fclose(f);
}

static void copy_dir(const char *src, const char *dst) {
    tt_rm_rf(dst);
    CHECK(mkdir(dst, 0755) == 0);
    DIR *d = opendir(src);
    CHECK(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char a[PATH_MAX + 300], b[PATH_MAX + 300];
        snprintf(a, sizeof a, "%s/%s", src, e->d_name);
        snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
        size_t n;
        uint8_t *buf = slurp(a, &n);
        spit(b, buf, n);
        free(buf);
    }
    closedir(d);
}

/* Expect open to fail with `code` and a message containing `needle`. */
static void expect_open_fail(const char *dir, int code, const char *needle, const char *what) {
    fl_dataset *ds = NULL;
    fl_error err;
    fl_error_clear(&err);
    int rc = fl_dataset_open(dir, &ds, &err);
    if (rc != code || !strstr(err.msg, needle)) {
        fprintf(stderr, "%s: expected %d (%s) with \"%s\", got %d: %s\n", what, code,
                fl_strerror(code), needle, rc, err.msg);
        exit(1);
    }
    CHECK(ds == NULL);
    printf("%-28s -> %s\n", what, err.msg);
}

typedef struct bad_list {
    uint64_t idx[16];
    int n;
    char msg[800];
} bad_list;

static int on_bad(void *user, uint64_t index, const fl_error *e) {
    bad_list *b = user;
    if (b->n < 16) b->idx[b->n] = index;
    b->n++;
    snprintf(b->msg, sizeof b->msg, "%s", e->msg);
    return 0;
}

/* Rewrite shard header field and fix the header CRC so only that field is "wrong". */
static void patch_header32(uint8_t *m, size_t off, uint32_t v) {
    fl_wr32(m + off, v);
    fl_wr32(m + FLH_HEADER_CRC, 0);
    fl_wr32(m + FLH_HEADER_CRC, fl_crc32c(0, m, FL_SHARD_HEADER_SIZE));
}

static void flipped_record_test(fl_backend b) {
    fl_error err;
    fl_writer_options o = tt_options(b, FL_ENC_JPEG, 0);
    const char *dst = tt_path(b == FL_BACKEND_LMDB ? "flip_lmdb" : "flip_shards");
    tt_write(dst, &o, 50);
    /* find record 17's bytes in the data file and flip one */
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    const uint8_t *p;
    size_t len;
    CHECK_OK(fl_dataset_get(ds, 17, &p, &len, 1, &err), &err);
    uint8_t *copy = malloc(len);
    memcpy(copy, p, len);
    char file[PATH_MAX + 1];
    snprintf(file, sizeof file, "%s", fl_dataset_shard_path(ds, 0));
    fl_dataset_close(ds);
    size_t n;
    uint8_t *m = slurp(file, &n);
    uint8_t *at = memmem(m, n, copy, len);
    CHECK(at);
    at[len / 2] ^= 0x40;
    spit(file, m, n);
    free(m);
    free(copy);
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err); /* index intact: opens */
    CHECK(fl_dataset_get(ds, 17, &p, &len, 1, &err) == FL_E_CHECKSUM);
    CHECK(strstr(err.msg, file) && strstr(err.msg, "record 17"));
    CHECK_OK(fl_dataset_get(ds, 17, &p, &len, 0, &err), &err); /* unchecked access still works */
    CHECK(fl_dataset_check(ds, 17, p, len, &err) == FL_E_CHECKSUM);
    CHECK(fl_dataset_check(ds, 17, p, len - 1, &err) == FL_E_FORMAT);
    bad_list bl = {0};
    uint64_t nbad = 0;
    CHECK(fl_dataset_verify(ds, on_bad, &bl, &nbad, &err) == FL_E_CHECKSUM);
    CHECK(nbad == 1 && bl.n == 1 && bl.idx[0] == 17);
    CHECK(strstr(bl.msg, "record 17") && strstr(bl.msg, "CRC32C mismatch"));
    CHECK(strstr(err.msg, "1 of 50 records are bad"));
    printf("%-28s -> %s\n", b == FL_BACKEND_LMDB ? "flipped byte (lmdb)" : "flipped byte (shards)", bl.msg);
    fl_dataset_close(ds);
}

int main(void) {
    fl_error err;
    flipped_record_test(FL_BACKEND_SHARDS);
    flipped_record_test(FL_BACKEND_LMDB);

    fl_writer_options o = tt_options(FL_BACKEND_SHARDS, FL_ENC_JPEG, 0);
    o.shard_bytes = 20000;
    /* compressed index block (the default): a flipped byte in it is caught by the index CRC */
    const char *zgood = tt_path("zgood");
    tt_write(zgood, &o, 60);
    const char *bad = tt_path("bad");
    char shard0[PATH_MAX + 300], shard1[PATH_MAX + 300], manifest[PATH_MAX + 300];
    snprintf(shard0, sizeof shard0, "%s/shard-00000.fls", bad);
    snprintf(shard1, sizeof shard1, "%s/shard-00001.fls", bad);
    snprintf(manifest, sizeof manifest, "%s/manifest.json", bad);
    size_t n;
    uint8_t *m;
    copy_dir(zgood, bad);
    m = slurp(shard0, &n);
    CHECK(fl_rd32(m + n - 64 + FLF_FLAGS) == FL_FOOTER_INDEX_ZSTD);
    m[fl_rd64(m + n - 64 + FLF_INDEX_OFFSET) + 5] ^= 0x01;
    spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_CHECKSUM, "index checksum", "compressed index bit flip");
    /* ... and garbage in its place with a matching CRC is a format error */
    m = slurp(shard0, &n);
    {
        uint8_t *f = m + n - 64;
        uint64_t off = fl_rd64(f + FLF_INDEX_OFFSET), st = fl_rd64(f + FLF_INDEX_STORED);
        memset(m + off, 0x5A, st);
        fl_wr32(f + FLF_INDEX_CRC, fl_crc32c(0, m + off, st));
        fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
    }
    spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_FORMAT, "corrupt compressed index", "compressed index garbage");

    /* the rest patches index entries in place: plain index blocks */
    fl_shard_compress_index = 0;
    const char *good = tt_path("good");
    tt_write(good, &o, 60);

    /* truncations */
    size_t cuts[] = {1, 64, 100, 5000};
    for (size_t k = 0; k < 4; k++) {
        copy_dir(good, bad);
        m = slurp(shard1, &n);
        spit(shard1, m, n - cuts[k]);
        free(m);
        expect_open_fail(bad, FL_E_TRUNCATED, shard1, "truncated shard");
    }
    copy_dir(good, bad);
    spit(shard1, "FLSH", 4);
    expect_open_fail(bad, FL_E_TRUNCATED, shard1, "4-byte shard");
    spit(shard1, "", 0);
    expect_open_fail(bad, FL_E_TRUNCATED, shard1, "empty shard");
    /* header written, no footer (an unfinished file that somehow got its final name) */
    copy_dir(good, bad);
    m = slurp(shard1, &n);
    memset(m + n - 64, 0, 64);
    spit(shard1, m, n);
    free(m);
    expect_open_fail(bad, FL_E_TRUNCATED, "no valid footer", "no footer");

    /* bad magic */
    copy_dir(good, bad);
    m = slurp(shard0, &n);
    memcpy(m, "GARBAGE!", 8);
    spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_FORMAT, "bad magic", "bad magic");
    /* not a shard at all, short */
    spit(shard0, "hello world, I am not a shard", 29);
    expect_open_fail(bad, FL_E_FORMAT, "not a fastload shard", "text file as shard");

    /* wrong version */
    copy_dir(good, bad);
    m = slurp(shard0, &n);
    patch_header32(m, FLH_VERSION, 3);
    spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_VERSION, "version 3", "version 3 shard");
    /* a v2 file whose header claims v1 (its footer still says 2) */
    copy_dir(good, bad);
    m = slurp(shard0, &n);
    patch_header32(m, FLH_VERSION, 1);
    spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_VERSION, "header says 1", "v1 header on a v2 shard");

    /* header byte flipped (CRC catches it) */
    copy_dir(good, bad);
    m = slurp(shard0, &n);
    m[FLH_RECORD_COUNT] ^= 1;
    spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_CHECKSUM, "header checksum", "header bit flip");

    /* header field wrong but CRC fixed: record count disagrees with footer */
    copy_dir(good, bad);
    m = slurp(shard0, &n);
    patch_header32(m, FLH_RECORD_COUNT, fl_rd32(m + FLH_RECORD_COUNT) + 1);
    spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_FORMAT, shard0, "header count mismatch");

    /* index byte flipped: index CRC */
    copy_dir(good, bad);
    m = slurp(shard0, &n);
    uint64_t idx_off = fl_rd64(m + n - 64 + FLF_INDEX_OFFSET);
    m[idx_off + 3 * FL_SHARD_INDEX_ENTRY + FLI_STORED_LEN] ^= 0x10;
    spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_CHECKSUM, "index checksum", "index bit flip");

    /* index entries pointing outside the data region, with CRCs recomputed (a forged file) */
    struct { size_t field; uint64_t val; int wide; const char *why; } forged[] = {
        {FLI_OFFSET, 1ull << 40, 1, "payload outside"},
        {FLI_OFFSET, 0, 1, "payload outside"},
        {FLI_STORED_LEN, 0xFFFFFFF0u, 0, "payload outside"},
        {FLI_NAME_LEN, 100000, 0, "name"},
        {FLI_NAME_OFFSET, 0xFFFFFFFFu, 0, "name outside"},
        {FLI_RAW_LEN, 7, 0, "raw length"},
        {FLI_LABEL, 0xFFFFFFFFu, 0, "negative label"},
        {FLI_FORMAT, 0, 0, "record format"},          /* unknown format */
        {FLI_FORMAT, 77, 0, "record format"},
        {FLI_FORMAT, FL_ENC_MIXED, 0, "record format"}, /* never a record's format */
        {FLI_FORMAT, FL_ENC_PNG, 0, "record format"},   /* not this (JPEG) dataset's encoding */
        {FLI_RESERVED, 1, 0, "reserved"},
    };
    for (size_t k = 0; k < sizeof forged / sizeof forged[0]; k++) {
        copy_dir(good, bad);
        m = slurp(shard0, &n);
        uint8_t *f = m + n - 64;
        idx_off = fl_rd64(f + FLF_INDEX_OFFSET);
        uint8_t *e = m + idx_off + 5 * FL_SHARD_INDEX_ENTRY + forged[k].field;
        if (forged[k].wide) fl_wr64(e, forged[k].val);
        else fl_wr32(e, (uint32_t)forged[k].val);
        uint64_t span = fl_rd64(f + FLF_INDEX_STORED);
        fl_wr32(f + FLF_INDEX_CRC, fl_crc32c(0, m + idx_off, span));
        fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
        spit(shard0, m, n);
        free(m);
        expect_open_fail(bad, FL_E_FORMAT, forged[k].why, "forged index entry");
        CHECK(strstr(err.msg, "") != NULL);
    }
    /* label beyond the class list (index valid, manifest has 3 classes) */
    copy_dir(good, bad);
    m = slurp(shard0, &n);
    {
        uint8_t *f = m + n - 64;
        idx_off = fl_rd64(f + FLF_INDEX_OFFSET);
        fl_wr32(m + idx_off + 2 * FL_SHARD_INDEX_ENTRY + FLI_LABEL, 3);
        uint64_t span = fl_rd64(f + FLF_INDEX_STORED);
        fl_wr32(f + FLF_INDEX_CRC, fl_crc32c(0, m + idx_off, span));
        fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
    }
    spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_FORMAT, "label 3 out of range", "label out of range");
    /* footer: corrupt the index offset (footer CRC fixed) */
    copy_dir(good, bad);
    m = slurp(shard0, &n);
    {
        uint8_t *f = m + n - 64;
        fl_wr64(f + FLF_INDEX_OFFSET, 1ull << 62);
        fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
    }
    spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_FORMAT, "corrupt footer", "footer index offset");

    /* manifests */
    copy_dir(good, bad);
    m = slurp(manifest, &n);
    char *text = malloc(n + 64);
    memcpy(text, m, n);
    text[n] = 0;
    free(m);
    struct { const char *from, *to; int code; const char *needle; } edits[] = {
        {"\"format_version\": 2", "\"format_version\": 7", FL_E_VERSION, "version 7"},
        {"\"format_version\": 2", "\"format_version\": 1", FL_E_FORMAT, "belongs to another dataset"},
        {"\"dataset_id\": \"", "\"dataset_id\": \"x", FL_E_FORMAT, "dataset_id"},
        {"\"dataset_id\": \"", "\"dataset_idx\": \"", FL_E_FORMAT, "dataset_id"},
        {"\"dataset_id\": \"", "\"dataset_id\": \"0", FL_E_FORMAT, "dataset_id"}, /* 33 digits */
        {"\"encoding\": \"jpeg\"", "\"encoding\": \"mixed\"", FL_E_FORMAT, "schema differs"},
        {"\"bytes\": ", "\"bytes\": 1", FL_E_FORMAT, "the manifest says 1"},
        {"\"format\": \"fastload-dataset\"", "\"format\": \"other\"", FL_E_FORMAT, "not a fastload manifest"},
        {"\"shard-00001.fls\"", "\"../good/shard-00001.fls\"", FL_E_FORMAT, "plain file name"},
        {"\"records\": 60", "\"records\": 61", FL_E_FORMAT, "manifest says 61"},
        {"\"encoding\": \"jpeg\"", "\"encoding\": \"gif\"", FL_E_FORMAT, "invalid schema"},
        {"\"encoding\": \"jpeg\"", "\"encoding\": \"raw\"", FL_E_FORMAT, "schema differs"},
        {"\"classes\": [", "\"classes\": [1, ", FL_E_FORMAT, "class 0 is not a string"},
        {"{", "[", FL_E_FORMAT, "JSON byte"},
        {"\"shard-00001.fls\"", "\"shard-00077.fls\"", -ENOENT, "shard-00077.fls"},
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        char *at = strstr(text, edits[k].from);
        CHECK(at);
        size_t fl = strlen(edits[k].from), tl = strlen(edits[k].to);
        char *t2 = malloc(n + 64);
        memcpy(t2, text, (size_t)(at - text));
        memcpy(t2 + (at - text), edits[k].to, tl);
        strcpy(t2 + (at - text) + tl, at + fl);
        spit(manifest, t2, strlen(t2));
        free(t2);
        expect_open_fail(bad, edits[k].code, edits[k].needle, "manifest edit");
        if (edits[k].code != -ENOENT) CHECK(strstr(err.msg, "") != NULL);
    }
    free(text);
    spit(manifest, "", 0);
    expect_open_fail(bad, FL_E_FORMAT, "manifest.json", "empty manifest");
    tt_rm_rf(manifest);
    expect_open_fail(bad, -ENOENT, "manifest.json", "missing manifest");
    expect_open_fail(tt_path("nonexistent"), -ENOENT, "nonexistent", "missing dataset");

    /* LMDB: manifest says more records than the environment holds */
    fl_writer_options lo = tt_options(FL_BACKEND_LMDB, FL_ENC_PNG, 0);
    const char *lg = tt_path("lgood");
    tt_write(lg, &lo, 20);
    const char *lb = tt_path("lbad");
    copy_dir(lg, lb);
    char lman[PATH_MAX + 300], ldata[PATH_MAX + 300];
    snprintf(lman, sizeof lman, "%s/manifest.json", lb);
    snprintf(ldata, sizeof ldata, "%s/data.mdb", lb);
    m = slurp(lman, &n);
    text = calloc(1, n + 64);
    memcpy(text, m, n);
    free(m);
    char *at = strstr(text, "\"records\": 20,\n  \"classes\"");
    CHECK(at);
    memcpy(at, "\"records\": 21", 13);
    at = strstr(text, "\"records\": 20, \"bytes\"");
    CHECK(at);
    memcpy(at, "\"records\": 21", 13);
    spit(lman, text, strlen(text));
    free(text);
    expect_open_fail(lb, FL_E_FORMAT, "manifest says 21", "lmdb count mismatch");
    copy_dir(lg, lb);
    spit(ldata, "not lmdb", 8);
    expect_open_fail(lb, FL_E_TRUNCATED, "data.mdb is 8 bytes, the manifest says", "lmdb garbage file");
    /* garbage of the size the manifest records: LMDB refuses it */
    copy_dir(lg, lb);
    m = slurp(ldata, &n);
    memset(m, 0x5A, n);
    spit(ldata, m, n);
    free(m);
    expect_open_fail(lb, FL_E_LMDB, "data.mdb", "lmdb garbage, right size");
    /* data.mdb of another dataset of the same shape (same size, another id) */
    const char *lo2 = tt_path("lother");
    tt_write(lo2, &lo, 20);
    copy_dir(lg, lb);
    char odata[PATH_MAX + 300];
    snprintf(odata, sizeof odata, "%s/data.mdb", lo2);
    m = slurp(odata, &n);
    spit(ldata, m, n);
    free(m);
    expect_open_fail(lb, FL_E_FORMAT, "belongs to another dataset", "lmdb from another dataset");
    printf("corrupt ok\n");
    (void)err;
    return 0;
}
