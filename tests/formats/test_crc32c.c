/* test_crc32c.c — CRC32C known vectors on both implementations (table and SSE4.2), agreement on
 * random lengths and alignments (short, and long enough for the three-chain blocks), incremental
 * (chained) use, and the fused copy + CRC. */
#include "fmt_test.h"
#include "fl_crc32c.h"

int main(void)
{
    const char *v = "123456789";
    CHECK(fl_crc32c_sw(0, v, 9) == 0xE3069283u);
    CHECK(fl_crc32c(0, v, 9) == 0xE3069283u);
    uint8_t zeros[32] = {0}, ones[32];
    memset(ones, 0xFF, sizeof ones);
    CHECK(fl_crc32c_sw(0, zeros, 32) == 0x8A9136AAu); /* RFC 3720 B.4 */
    CHECK(fl_crc32c_sw(0, ones, 32) == 0x62A8AB43u);
    CHECK(fl_crc32c_sw(0, "", 0) == 0);
    int hw = fl_crc32c_hw_available();
    if (hw) {
        CHECK(fl_crc32c_hw(0, v, 9) == 0xE3069283u);
        CHECK(fl_crc32c_hw(0, zeros, 32) == 0x8A9136AAu);
        CHECK(fl_crc32c_hw(0, ones, 32) == 0x62A8AB43u);
    }
    static uint8_t buf[5000];
    uint64_t s = 42;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)tt_rng(&s);
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len < 300; len += 7) {
            uint32_t a = fl_crc32c_sw(0, buf + off, len);
            if (hw)
                CHECK(fl_crc32c_hw(0, buf + off, len) == a);
            CHECK(fl_crc32c(0, buf + off, len) == a);
            /* chaining: crc(a||b) == crc(crc(a), b) */
            size_t cut = len / 3;
            CHECK(fl_crc32c(fl_crc32c(0, buf + off, cut), buf + off + cut, len - cut) == a);
        }
    CHECK(fl_crc32c(0, buf, sizeof buf) == fl_crc32c_sw(0, buf, sizeof buf));

    /* Long inputs: the hardware path's three-chain blocks (3 x 256 and 3 x 4096 bytes) and every
     * remainder after them, against the table; and the fused copy + CRC on the same lengths. */
    static uint8_t big[40000], dst[40000 + 16];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)tt_rng(&s);
    static const size_t lens[] = {767,   768,   769,   775,   776,   1535,  1536,
                                  1544,  12287, 12288, 12289, 12295, 13056, 13057,
                                  24576, 25343, 25344, 36864, 39990};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (size_t off = 0; off < 9; off += 4) {
            size_t len = lens[li];
            if (off + len > sizeof big)
                continue;
            uint32_t a = fl_crc32c_sw(0, big + off, len);
            if (hw)
                CHECK(fl_crc32c_hw(0, big + off, len) == a);
            CHECK(fl_crc32c(0x12345678u, big + off, len) ==
                  fl_crc32c_sw(0x12345678u, big + off, len));
            memset(dst, 0xAA, sizeof dst);
            CHECK(fl_crc32c_copy(dst + 7 - off / 4, big + off, len) == a);
            CHECK(memcmp(dst + 7 - off / 4, big + off, len) == 0);
            CHECK(dst[7 - off / 4 + len] == 0xAA && (off / 4 == 7 || dst[6 - off / 4] == 0xAA));
        }
    for (size_t len = 0; len < 300; len += 1 + len / 16) { /* short copies, every alignment */
        memset(dst, 0xAA, sizeof dst);
        CHECK(fl_crc32c_copy(dst + 3, buf + len % 8, len) == fl_crc32c_sw(0, buf + len % 8, len));
        CHECK(memcmp(dst + 3, buf + len % 8, len) == 0 && dst[3 + len] == 0xAA && dst[2] == 0xAA);
    }
    CHECK(fl_crc32c_copy(dst, v, 9) == 0xE3069283u);
    printf("crc32c ok (hardware path %s)\n", hw ? "tested" : "not available on this CPU");
    return 0;
}
