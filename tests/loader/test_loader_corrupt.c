/* test_loader_corrupt.c — integrity: a flipped byte in a record makes fl_loader_next fail with
 * FL_E_CHECKSUM and a message naming the shard file and the record (io_uring, pread and mmap,
 * plain and zstd), and with FL_CORRUPT_SKIP the record is replaced by the next good one and
 * counted; a truncated shard makes fl_loader_create fail naming the file. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

#define BAD 23

static char shard_file[4096];

static void flip_byte(const char *path, uint64_t rec)
{
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open(path, &ds, &err), &err);
    fl_record_info info;
    CHECK_OK(fl_dataset_record_info(ds, rec, &info, &err), &err);
    snprintf(shard_file, sizeof shard_file, "%s", fl_dataset_shard_path(ds, info.shard));
    fl_dataset_close(ds);
    int fd = open(shard_file, O_RDWR);
    CHECK(fd >= 0);
    uint8_t c;
    off_t off = (off_t)info.offset + info.stored_len / 2;
    CHECK(pread(fd, &c, 1, off) == 1);
    c ^= 0x10;
    CHECK(pwrite(fd, &c, 1, off) == 1);
    close(fd);
}

static void expect_error(const char *path, fl_io_mode io)
{
    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 10;
    o.io = io;
    fl_loader *L = fx_loader(path, &o);
    if (!L)
        return; /* no io_uring here */
    fl_error err;
    fl_batch *b;
    for (int i = 0; i < 2; i++) {
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        fl_loader_release(L, b);
    }
    int rc = fl_loader_next(L, &b, &err);
    printf("error as expected: %s\n", err.msg);
    CHECK(rc == FL_E_CHECKSUM && err.code == rc && b == NULL);
    CHECK(strstr(err.msg, shard_file) != NULL);
    CHECK(strstr(err.msg, "record 23") != NULL);
    /* the loader stays failed */
    CHECK(fl_loader_next(L, &b, &err) == FL_E_CHECKSUM);
    fl_loader_close(L);
}

static void expect_skip(const char *path, const fx_spec *s, fl_io_mode io, uint32_t workers)
{
    fl_loader_options o;
    fx_options(&o);
    o.batch_size = 10;
    o.io = io;
    o.workers = workers;
    o.on_corrupt = FL_CORRUPT_SKIP;
    fl_loader *L = fx_loader(path, &o);
    if (!L)
        return; /* no io_uring here */
    fl_error err;
    uint32_t skipped = 0;
    for (uint64_t bt = 0; bt < fl_loader_batches_per_epoch(L); bt++) {
        fl_batch *b;
        CHECK_OK(fl_loader_next(L, &b, &err), &err);
        skipped += b->skipped;
        CHECK(b->skipped == (bt == BAD / 10));
        for (uint32_t k = 0; k < b->size; k++) {
            uint64_t i = bt * 10 + k;
            uint64_t got = i == BAD ? BAD + 1 : i; /* replaced by the next good record */
            fx_check_sample(b, k, s, got);
        }
        fl_loader_release(L, b);
    }
    fl_loader_stats st;
    fl_loader_stats_get(L, &st);
    CHECK(skipped == 1 && st.skipped == 1);
    fl_loader_close(L);
}

int main(void)
{
    char *dir = fx_tmpdir("corrupt");
    fx_spec s = {.backend = FL_BACKEND_SHARDS,
                 .encoding = FL_ENC_RAW,
                 .compression = FL_COMP_NONE,
                 .n = 50,
                 .height = 8,
                 .width = 8,
                 .channels = 3,
                 .classes = 5,
                 .shard_bytes = 2048};
    for (int z = 0; z < 2; z++) {
        s.compression = z ? FL_COMP_ZSTD : FL_COMP_NONE;
        char *p = fx_make(dir, z ? "zstd" : "plain", &s);
        flip_byte(p, BAD);
        expect_error(p, FL_IO_MMAP);
        expect_error(p, FL_IO_MEMORY);
        expect_error(p, FL_IO_AUTO);
        expect_error(p, FL_IO_URING);
        expect_error(p, FL_IO_PREAD);
        expect_skip(p, &s, FL_IO_MMAP, 2);
        expect_skip(p, &s, FL_IO_MEMORY, 2);
        expect_skip(p, &s, FL_IO_URING, 1);
        expect_skip(p, &s, FL_IO_PREAD, 3);
        free(p);
    }

    /* truncated shard: refused at create, naming the file */
    char *p = fx_make(dir, "trunc", &s);
    {
        fl_dataset *ds;
        fl_error err;
        CHECK_OK(fl_dataset_open(p, &ds, &err), &err);
        snprintf(shard_file, sizeof shard_file, "%s", fl_dataset_shard_path(ds, 1));
        fl_dataset_close(ds);
    }
    int fd = open(shard_file, O_RDWR);
    CHECK(fd >= 0);
    off_t len = lseek(fd, 0, SEEK_END);
    CHECK(ftruncate(fd, len - 100) == 0);
    close(fd);
    fl_loader_options o;
    fx_options(&o);
    fl_loader *L = (fl_loader *)&o;
    fl_error err;
    int rc = fl_loader_create(p, &o, &L, &err);
    printf("truncated shard refused: %s\n", err.msg);
    CHECK(rc < 0 && L == NULL);
    CHECK(strstr(err.msg, shard_file) != NULL);
    free(p);
    fx_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
