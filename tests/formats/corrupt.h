/* corrupt.h — helpers of the formats_corrupt_* tests (damaged datasets give clear errors naming the
 * file, never a crash): a dataset copy to damage, the open that must fail with a given code and
 * message, CRC-fixing header patches, and the undamaged fixture. */
#ifndef FL_TEST_CORRUPT_H
#define FL_TEST_CORRUPT_H

#define _GNU_SOURCE
#include "fmt_test.h"
#include "fl_shard.h"

static inline void copy_dir(const char *src, const char *dst)
{
    tt_rm_rf(dst);
    CHECK(mkdir(dst, 0755) == 0);
    DIR *d = opendir(src);
    CHECK(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char a[PATH_MAX + 300], b[PATH_MAX + 300];
        snprintf(a, sizeof a, "%s/%s", src, e->d_name);
        snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
        size_t n;
        uint8_t *buf = tt_slurp(a, &n);
        tt_spit(b, buf, n);
        free(buf);
    }
    closedir(d);
}

/* Expect open to fail with `code` and a message containing `needle`. */
static inline void expect_open_fail(const char *dir, int code, const char *needle, const char *what)
{
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

static inline int on_bad(void *user, uint64_t index, const fl_error *e)
{
    bad_list *b = user;
    if (b->n < 16)
        b->idx[b->n] = index;
    b->n++;
    snprintf(b->msg, sizeof b->msg, "%s", e->msg);
    return 0;
}

/* Rewrite shard header field and fix the header CRC so only that field is "wrong". */
static inline void patch_header32(uint8_t *m, size_t off, uint32_t v)
{
    fl_wr32(m + off, v);
    fl_wr32(m + FLH_HEADER_CRC, 0);
    fl_wr32(m + FLH_HEADER_CRC, fl_crc32c(0, m, FL_SHARD_HEADER_SIZE));
}

/* The damaged copy's paths (under the test's temp dir): dataset "bad", its shards 0 and 1 and its
 * manifest. */
typedef struct bad_paths {
    const char *dir;
    char shard0[PATH_MAX + 300], shard1[PATH_MAX + 300], manifest[PATH_MAX + 300];
} bad_paths;

static inline void bad_paths_init(bad_paths *b)
{
    b->dir = tt_path("bad");
    snprintf(b->shard0, sizeof b->shard0, "%s/shard-00000.fls", b->dir);
    snprintf(b->shard1, sizeof b->shard1, "%s/shard-00001.fls", b->dir);
    snprintf(b->manifest, sizeof b->manifest, "%s/manifest.json", b->dir);
}

/* The undamaged fixture: 60 JPEG records in shards of 20,000 bytes. compress_index 0 writes plain
 * index blocks (so tests can patch entries in place), 1 the default zstd-compressed ones. */
static inline const char *write_good(const char *name, int compress_index)
{
    fl_writer_options o = tt_options(FL_BACKEND_SHARDS, FL_ENC_JPEG, 0);
    o.shard_bytes = 20000;
    fl_shard_compress_index = compress_index;
    const char *dir = tt_path(name);
    tt_write(dir, &o, 60);
    return dir;
}

#endif
