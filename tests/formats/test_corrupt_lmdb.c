/* test_corrupt_lmdb.c — damaged LMDB datasets fail to open with an error naming data.mdb or the
 * manifest: the manifest counts more records than the environment holds, data.mdb replaced by a
 * short garbage file, by garbage of the size the manifest records, by another same-shape dataset's
 * data.mdb (another dataset id). */
#include "corrupt.h"

int main(void)
{
    size_t n;
    uint8_t *m;
    char *text;
    /* LMDB: manifest says more records than the environment holds */
    fl_writer_options lo = tt_options(FL_BACKEND_LMDB, FL_ENC_PNG, 0);
    const char *lg = tt_path("lgood");
    tt_write(lg, &lo, 20);
    const char *lb = tt_path("lbad");
    copy_dir(lg, lb);
    char lman[PATH_MAX + 300], ldata[PATH_MAX + 300];
    snprintf(lman, sizeof lman, "%s/manifest.json", lb);
    snprintf(ldata, sizeof ldata, "%s/data.mdb", lb);
    m = tt_slurp(lman, &n);
    text = calloc(1, n + 64);
    memcpy(text, m, n);
    free(m);
    char *at = strstr(text, "\"records\": 20,\n  \"classes\"");
    CHECK(at);
    memcpy(at, "\"records\": 21", 13);
    at = strstr(text, "\"records\": 20, \"bytes\"");
    CHECK(at);
    memcpy(at, "\"records\": 21", 13);
    tt_spit(lman, text, strlen(text));
    free(text);
    expect_open_fail(lb, FL_E_FORMAT, "manifest says 21", "lmdb count mismatch");
    copy_dir(lg, lb);
    tt_spit(ldata, "not lmdb", 8);
    expect_open_fail(lb, FL_E_TRUNCATED, "data.mdb is 8 bytes, the manifest says",
                     "lmdb garbage file");
    /* garbage of the size the manifest records: LMDB refuses it */
    copy_dir(lg, lb);
    m = tt_slurp(ldata, &n);
    memset(m, 0x5A, n);
    tt_spit(ldata, m, n);
    free(m);
    expect_open_fail(lb, FL_E_LMDB, "data.mdb", "lmdb garbage, right size");
    /* data.mdb of another dataset of the same shape (same size, another id) */
    const char *lo2 = tt_path("lother");
    tt_write(lo2, &lo, 20);
    copy_dir(lg, lb);
    char odata[PATH_MAX + 300];
    snprintf(odata, sizeof odata, "%s/data.mdb", lo2);
    m = tt_slurp(odata, &n);
    tt_spit(ldata, m, n);
    free(m);
    expect_open_fail(lb, FL_E_FORMAT, "belongs to another dataset", "lmdb from another dataset");
    printf("corrupt lmdb ok\n");
    return 0;
}
