/* test_open_fds.c — a dataset reads the files it opened, from open to close:
 * after fl_dataset_open, the dataset directory is renamed away, a different dataset is
 * written at the same path and the old directory is deleted; the open dataset still returns
 * every one of its own records (through its mapping and through fl_dataset_file_fd), and a new
 * open sees the new dataset. Also: fl_dataset_file_fd range, and an LMDB dataset likewise. */
#include "fmt_test.h"

static void check_fds_read_own_records(const fl_dataset *ds)
{
    fl_error err;
    uint8_t buf[1 << 16];
    for (uint64_t i = 0; i < fl_dataset_count(ds); i++) {
        fl_record_info info;
        CHECK_OK(fl_dataset_record_info(ds, i, &info, &err), &err);
        const uint8_t *p;
        size_t len;
        CHECK_OK(fl_dataset_get(ds, i, &p, &len, 1, &err), &err);
        if (fl_dataset_backend(ds) == FL_BACKEND_SHARDS) {
            int fd = fl_dataset_file_fd(ds, info.shard);
            CHECK(fd >= 0 && len <= sizeof buf);
            CHECK(pread(fd, buf, len, (off_t)info.offset) == (ssize_t)len);
            CHECK(memcmp(buf, p, len) == 0);
            CHECK_OK(fl_dataset_check(ds, i, buf, len, &err), &err);
        }
    }
    CHECK(fl_dataset_file_fd(ds, fl_dataset_num_shards(ds)) == -1);
}

static void run(fl_backend b)
{
    const char *dst = tt_path(b == FL_BACKEND_LMDB ? "l" : "s");
    char old[PATH_MAX + 300];
    snprintf(old, sizeof old, "%s.old", dst);
    fl_writer_options o = tt_options(b, FL_ENC_RAW, 1);
    o.shard_bytes = 6000;
    tt_write(dst, &o, 23);
    fl_dataset *ds;
    fl_error err;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    for (uint32_t s = 0; s < fl_dataset_num_shards(ds); s++)
        CHECK(fl_dataset_file_fd(ds, s) >= 0);
    /* replace it under the open dataset: another dataset (other records) at the same path */
    CHECK(rename(dst, old) == 0);
    fl_writer_options o2 = tt_options(b, FL_ENC_JPEG, 0);
    tt_write(dst, &o2, 5);
    tt_rm_rf(old);
    tt_check_all(ds, 23);
    check_fds_read_own_records(ds);
    fl_dataset_close(ds);
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    CHECK(fl_dataset_count(ds) == 5 && fl_dataset_schema(ds)->encoding == FL_ENC_JPEG);
    tt_check_all(ds, 5);
    fl_dataset_close(ds);
    tt_rm_rf(dst);
    printf("%s: ok\n", b == FL_BACKEND_LMDB ? "lmdb" : "shards");
}

int main(void)
{
    run(FL_BACKEND_SHARDS);
    run(FL_BACKEND_LMDB);
    return 0;
}
