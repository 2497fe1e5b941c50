/* test_crc32c.c — CRC32C known vectors on both implementations (table and SSE4.2), agreement on
 * random lengths and alignments, and incremental (chained) use. */
#include "fmt_test.h"
#include "fl_crc32c.h"

int main(void) {
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
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)tt_rng(&s);
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len < 300; len += 7) {
            uint32_t a = fl_crc32c_sw(0, buf + off, len);
            if (hw) CHECK(fl_crc32c_hw(0, buf + off, len) == a);
            CHECK(fl_crc32c(0, buf + off, len) == a);
            /* chaining: crc(a||b) == crc(crc(a), b) */
            size_t cut = len / 3;
            CHECK(fl_crc32c(fl_crc32c(0, buf + off, cut), buf + off + cut, len - cut) == a);
        }
    CHECK(fl_crc32c(0, buf, sizeof buf) == fl_crc32c_sw(0, buf, sizeof buf));
    printf("crc32c ok (hardware path %s)\n", hw ? "tested" : "not available on this CPU");
    return 0;
}
