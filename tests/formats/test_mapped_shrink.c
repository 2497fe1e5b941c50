/* test_mapped_shrink.c — a data file truncated after the open, while the dataset is held (another
 * process rewriting it in place, a user's `truncate`): the reader's own reads of the mapping —
 * the checked fl_dataset_get and fl_dataset_verify — return FL_E_TRUNCATED naming the file and
 * the record for every record past the new end, the others still read and check, and the process
 * gets no SIGBUS (the pages past the end of a shared mapping fault; fl_mapped_guard.h). A SIGBUS
 * that is not a guarded read's still reaches the handler the program had (checked last). Shards
 * and LMDB, zstd and uncompressed. */
#include "corrupt.h"

#include <signal.h>
#include <unistd.h>

static void shrink_test(fl_backend b, int zstd)
{
    fl_error err;
    fl_writer_options o = tt_options(b, FL_ENC_JPEG, zstd);
    char name[64];
    snprintf(name, sizeof name, "shrink_%s_%d", b == FL_BACKEND_LMDB ? "lmdb" : "shards", zstd);
    const char *dst = tt_path(name);
    const uint64_t n = 400;
    tt_write(dst, &o, n);
    fl_dataset *ds;
    CHECK_OK(fl_dataset_open(dst, &ds, &err), &err);
    char file[PATH_MAX + 1];
    snprintf(file, sizeof file, "%s", fl_dataset_shard_path(ds, 0));
    /* where each record lies in the file: record 0 found by its bytes, the others by their
     * distance from it in the mapping (unchecked gets do not touch the mapping) */
    const uint8_t *p[400];
    size_t len[400];
    for (uint64_t i = 0; i < n; i++)
        CHECK_OK(fl_dataset_get(ds, i, &p[i], &len[i], 0, &err), &err);
    size_t fn;
    uint8_t *m = tt_slurp(file, &fn);
    uint8_t *at = memmem(m, fn, p[0], len[0]);
    CHECK(at);
    int64_t off0 = at - m;
    free(m);
    /* cut at half the file, on a page boundary: every page from there on faults */
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t cut = fn / 2 / (uint64_t)pg * (uint64_t)pg;
    uint64_t past = 0, first_past = n, first_kept = n;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t end = (uint64_t)(off0 + (p[i] - p[0])) + len[i];
        if (end > cut) {
            past++;
            if (first_past == n)
                first_past = i;
        } else if (first_kept == n) {
            first_kept = i;
        }
    }
    CHECK(past > 0 && past < n);
    CHECK(truncate(file, (off_t)cut) == 0);
    const uint8_t *q;
    size_t ql;
    CHECK_OK(fl_dataset_get(ds, first_kept, &q, &ql, 1, &err), &err); /* before the cut */
    CHECK(fl_dataset_get(ds, first_past, &q, &ql, 1, &err) == FL_E_TRUNCATED);
    char rec[64];
    snprintf(rec, sizeof rec, "record %llu:", (unsigned long long)first_past);
    CHECK(strstr(err.msg, file) && strstr(err.msg, rec) &&
          strstr(err.msg, "shorter than when it was opened"));
    bad_list bl = {0};
    uint64_t nbad = 0;
    CHECK(fl_dataset_verify(ds, on_bad, &bl, &nbad, &err) != 0);
    CHECK(nbad == past); /* exactly the records past the cut, each with this error */
    CHECK(strstr(bl.msg, "shorter than when it was opened"));
    printf("%-30s -> %llu of %llu records: %s\n", name, (unsigned long long)nbad,
           (unsigned long long)n, bl.msg);
    fl_dataset_close(ds);
}

static volatile sig_atomic_t own_handler_ran;
static void own_handler(int sig)
{
    (void)sig;
    own_handler_ran = 1;
}

int main(void)
{
    /* the program's own SIGBUS handler, installed before the guard's */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = own_handler;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGBUS, &sa, NULL) == 0);
    shrink_test(FL_BACKEND_SHARDS, 0);
    shrink_test(FL_BACKEND_SHARDS, 3);
    shrink_test(FL_BACKEND_LMDB, 0);
    shrink_test(FL_BACKEND_LMDB, 3);
    /* a SIGBUS outside a guarded read goes on to the handler that was there before */
    CHECK(raise(SIGBUS) == 0);
    CHECK(own_handler_ran == 1);
    printf("mapped shrink ok\n");
    return 0;
}
