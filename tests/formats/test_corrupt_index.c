/* test_corrupt_index.c — damaged shard indexes and footers fail to open with FL_E_CHECKSUM or
 * FL_E_FORMAT naming the problem: a bit flip in a compressed index block (its CRC), garbage there
 * with a matching CRC, a bit flip in a plain index block, forged entries with CRCs recomputed
 * (payload or name outside the data region, raw length, label, record format, reserved field), a
 * label beyond the class list, a footer whose index offset is outside the file. */
#include "corrupt.h"

int main(void)
{
    fl_error err;
    fl_error_clear(&err);
    bad_paths B;
    bad_paths_init(&B);
    const char *bad = B.dir, *shard0 = B.shard0;
    size_t n;
    uint8_t *m;
    /* compressed index block (the default): a flipped byte in it is caught by the index CRC */
    const char *zgood = write_good("zgood", 1);
    copy_dir(zgood, bad);
    m = tt_slurp(shard0, &n);
    CHECK(fl_rd32(m + n - 64 + FLF_FLAGS) == FL_FOOTER_INDEX_ZSTD);
    m[fl_rd64(m + n - 64 + FLF_INDEX_OFFSET) + 5] ^= 0x01;
    tt_spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_CHECKSUM, "index checksum", "compressed index bit flip");
    /* ... and garbage in its place with a matching CRC is a format error */
    m = tt_slurp(shard0, &n);
    {
        uint8_t *f = m + n - 64;
        uint64_t off = fl_rd64(f + FLF_INDEX_OFFSET), st = fl_rd64(f + FLF_INDEX_STORED);
        memset(m + off, 0x5A, st);
        fl_wr32(f + FLF_INDEX_CRC, fl_crc32c(0, m + off, st));
        fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
    }
    tt_spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_FORMAT, "corrupt compressed index", "compressed index garbage");

    /* the rest patches index entries in place: plain index blocks */
    const char *good = write_good("good", 0);

    /* index byte flipped: index CRC */
    copy_dir(good, bad);
    m = tt_slurp(shard0, &n);
    uint64_t idx_off = fl_rd64(m + n - 64 + FLF_INDEX_OFFSET);
    m[idx_off + 3 * FL_SHARD_INDEX_ENTRY + FLI_STORED_LEN] ^= 0x10;
    tt_spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_CHECKSUM, "index checksum", "index bit flip");

    /* index entries pointing outside the data region, with CRCs recomputed (a forged file) */
    struct {
        size_t field;
        uint64_t val;
        int wide;
        const char *why;
    } forged[] = {
        {FLI_OFFSET, 1ull << 40, 1, "payload outside"},
        {FLI_OFFSET, 0, 1, "payload outside"},
        {FLI_STORED_LEN, 0xFFFFFFF0u, 0, "payload outside"},
        {FLI_NAME_LEN, 100000, 0, "name"},
        {FLI_NAME_OFFSET, 0xFFFFFFFFu, 0, "name outside"},
        {FLI_RAW_LEN, 7, 0, "raw length"},
        {FLI_LABEL, 0xFFFFFFFFu, 0, "negative label"},
        {FLI_FORMAT, 0, 0, "record format"}, /* unknown format */
        {FLI_FORMAT, 77, 0, "record format"},
        {FLI_FORMAT, FL_ENC_MIXED, 0, "record format"}, /* never a record's format */
        {FLI_FORMAT, FL_ENC_PNG, 0, "record format"},   /* not this (JPEG) dataset's encoding */
        {FLI_RESERVED, 1, 0, "reserved"},
    };
    for (size_t k = 0; k < sizeof forged / sizeof forged[0]; k++) {
        copy_dir(good, bad);
        m = tt_slurp(shard0, &n);
        uint8_t *f = m + n - 64;
        idx_off = fl_rd64(f + FLF_INDEX_OFFSET);
        uint8_t *e = m + idx_off + 5 * FL_SHARD_INDEX_ENTRY + forged[k].field;
        if (forged[k].wide)
            fl_wr64(e, forged[k].val);
        else
            fl_wr32(e, (uint32_t)forged[k].val);
        uint64_t span = fl_rd64(f + FLF_INDEX_STORED);
        fl_wr32(f + FLF_INDEX_CRC, fl_crc32c(0, m + idx_off, span));
        fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
        tt_spit(shard0, m, n);
        free(m);
        expect_open_fail(bad, FL_E_FORMAT, forged[k].why, "forged index entry");
        CHECK(strstr(err.msg, "") != NULL);
    }
    /* label beyond the class list (index valid, manifest has 3 classes) */
    copy_dir(good, bad);
    m = tt_slurp(shard0, &n);
    {
        uint8_t *f = m + n - 64;
        idx_off = fl_rd64(f + FLF_INDEX_OFFSET);
        fl_wr32(m + idx_off + 2 * FL_SHARD_INDEX_ENTRY + FLI_LABEL, 3);
        uint64_t span = fl_rd64(f + FLF_INDEX_STORED);
        fl_wr32(f + FLF_INDEX_CRC, fl_crc32c(0, m + idx_off, span));
        fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
    }
    tt_spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_FORMAT, "label 3 out of range", "label out of range");
    /* footer: corrupt the index offset (footer CRC fixed) */
    copy_dir(good, bad);
    m = tt_slurp(shard0, &n);
    {
        uint8_t *f = m + n - 64;
        fl_wr64(f + FLF_INDEX_OFFSET, 1ull << 62);
        fl_wr32(f + FLF_FOOTER_CRC, fl_crc32c(0, f, FLF_FOOTER_CRC));
    }
    tt_spit(shard0, m, n);
    free(m);
    expect_open_fail(bad, FL_E_FORMAT, "corrupt footer", "footer index offset");

    printf("corrupt index ok\n");
    return 0;
}
