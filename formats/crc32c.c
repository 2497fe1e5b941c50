/* crc32c.c — CRC32C (Castagnoli) for record, index and header checksums: the SSE4.2 crc32
 * instruction when the CPU has it (chosen once at run time), a slice-by-8 table otherwise. */
#include "fl_crc32c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "fl_dataset.h"

#define CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t crc_table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ ((c & 1u) ? CRC32C_POLY : 0u);
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static void ensure_table(void) { pthread_once(&table_once, build_table); }

uint32_t fl_crc32c_sw(uint32_t crc, const void *data, size_t len) {
    ensure_table();
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8); /* little-endian host assumed, as for the whole on-disk format */
        v ^= c;
        c = crc_table[7][v & 0xFF] ^ crc_table[6][(v >> 8) & 0xFF] ^ crc_table[5][(v >> 16) & 0xFF] ^
            crc_table[4][(v >> 24) & 0xFF] ^ crc_table[3][(v >> 32) & 0xFF] ^
            crc_table[2][(v >> 40) & 0xFF] ^ crc_table[1][(v >> 48) & 0xFF] ^
            crc_table[0][(v >> 56) & 0xFF];
        p += 8;
        len -= 8;
    }
    while (len--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xFF];
    return ~c;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw_impl(uint32_t crc, const void *data,
                                                                  size_t len) {
    const uint8_t *p = data;
    uint64_t c = (uint32_t)~crc;
    while (len && ((uintptr_t)p & 7u)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        len -= 8;
    }
    while (len--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

int fl_crc32c_hw_available(void) { return __builtin_cpu_supports("sse4.2") ? 1 : 0; }

uint32_t fl_crc32c_hw(uint32_t crc, const void *data, size_t len) {
    return crc32c_hw_impl(crc, data, len);
}
#else
int fl_crc32c_hw_available(void) { return 0; }
uint32_t fl_crc32c_hw(uint32_t crc, const void *data, size_t len) {
    return fl_crc32c_sw(crc, data, len);
}
#endif

uint32_t fl_crc32c(uint32_t crc, const void *data, size_t len) {
    static atomic_int mode; /* 0 unknown, 1 hardware, 2 table */
    int m = atomic_load_explicit(&mode, memory_order_relaxed);
    if (m == 0) {
        m = fl_crc32c_hw_available() ? 1 : 2;
        atomic_store_explicit(&mode, m, memory_order_relaxed);
    }
    return m == 1 ? fl_crc32c_hw(crc, data, len) : fl_crc32c_sw(crc, data, len);
}
