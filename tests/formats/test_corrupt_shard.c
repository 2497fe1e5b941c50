/* test_corrupt_shard.c — damaged shard files fail to open with an error naming the shard: truncated
 * (1, 64, 100, 5000 bytes off; 4 bytes; empty), a header without footer, bad magic, a text file,
 * a version we do not read, a v1 header on a v2 file, a header bit flip (CRC), a header field that
 * disagrees with the footer (CRC fixed). */
#include "corrupt.h"

int main(void)
{
    const char *good = write_good("good", 0);
    bad_paths B;
    bad_paths_init(&B);
    const char *bad = B.dir, *shard0 = B.shard0, *shard1 = B.shard1;
    size_t n;
    uint8_t *m;

    /* truncations */
    size_t cuts[] = {1, 64, 100, 5000};
    for (size_t k = 0; k < 4; k++) {
        copy_dir(good, bad);
        m = tt_slurp(shard1, &n);
        tt_spit(shard1, m, n - cuts[k]);
        free(m);
        expect_open_fail(bad, FL_E_TRUNCATED, shard1, "truncated shard");
    }
    copy_dir(good, bad);
    tt_spit(shard1, "FLSH", 4);
    expect_open_fail(bad, FL_E_TRUNCATED, shard1, "4-byte shard");
    tt_spit(shard1, "", 0);
    expect_open_fail(bad, FL_E_TRUNCATED, shard1, "empty shard");
    /* header written, no footer (an unfinished file that somehow got its final name) */
    copy_dir(good, bad);
    m = tt_slurp(shard1, &n);
    memset(m + n - 64, 0, 64);
    tt_spit(shard1, m, n);
    free(m);
    expect_open_fail(bad, FL_E_TRUNCATED, "no valid footer", "no footer");

    /* bad magic */
    copy_dir(good, bad);
    m = tt_slurp(shard0, &n);
    memcpy(m, "GARBAGE!", 8);
    tt_spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_FORMAT, "bad magic", "bad magic");
    /* not a shard at all, short */
    tt_spit(shard0, "hello world, I am not a shard", 29);
    expect_open_fail(bad, FL_E_FORMAT, "not a fastload shard", "text file as shard");

    /* wrong version */
    copy_dir(good, bad);
    m = tt_slurp(shard0, &n);
    patch_header32(m, FLH_VERSION, FL_FORMAT_VERSION + 1);
    tt_spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_VERSION, "version 4", "version 4 shard");
    /* a v2 file whose header claims v1 (its footer still says 2) */
    copy_dir(good, bad);
    m = tt_slurp(shard0, &n);
    patch_header32(m, FLH_VERSION, 1);
    tt_spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_VERSION, "header says 1", "v1 header on a v2 shard");

    /* header byte flipped (CRC catches it) */
    copy_dir(good, bad);
    m = tt_slurp(shard0, &n);
    m[FLH_RECORD_COUNT] ^= 1;
    tt_spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_CHECKSUM, "header checksum", "header bit flip");

    /* header field wrong but CRC fixed: record count disagrees with footer */
    copy_dir(good, bad);
    m = tt_slurp(shard0, &n);
    patch_header32(m, FLH_RECORD_COUNT, fl_rd32(m + FLH_RECORD_COUNT) + 1);
    tt_spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_FORMAT, shard0, "header count mismatch");

    printf("corrupt shard ok\n");
    return 0;
}
