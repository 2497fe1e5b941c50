/* test_corrupt_record.c — a flipped payload byte in an otherwise intact dataset (shards and LMDB):
 * the index still opens; a checked get fails with FL_E_CHECKSUM naming the file and the record, an
 * unchecked get still works, fl_dataset_check and fl_dataset_verify name record 17 and only it. */
#include "corrupt.h"

static void flipped_record_test(fl_backend b)
{
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
    uint8_t *m = tt_slurp(file, &n);
    uint8_t *at = memmem(m, n, copy, len);
    CHECK(at);
    at[len / 2] ^= 0x40;
    tt_spit(file, m, n);
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
    printf("%-28s -> %s\n", b == FL_BACKEND_LMDB ? "flipped byte (lmdb)" : "flipped byte (shards)",
           bl.msg);
    fl_dataset_close(ds);
}

int main(void)
{
    flipped_record_test(FL_BACKEND_SHARDS);
    flipped_record_test(FL_BACKEND_LMDB);
    printf("corrupt record ok\n");
    return 0;
}
