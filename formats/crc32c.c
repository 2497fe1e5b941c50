/* crc32c.c — CRC32C (Castagnoli) for record, index and header checksums: the SSE4.2 crc32
 * instruction when the CPU has it (chosen once at run time), a slice-by-8 table otherwise; and
 * the fused copy + CRC used for raw records.
 *
 * The hardware path runs three independent crc32 chains over three adjacent blocks and joins
 * them: the instruction has a 3-cycle latency but issues every cycle, so one chain leaves two
 * thirds of it idle. Joining uses linearity: the register after A||B equals the register after A
 * pushed through |B| zero bytes, xor the register after B started from 0. "Pushed through n zero
 * bytes" is multiplication by x^(8n) modulo the polynomial, done with four 256-entry tables per
 * block length (built once). */
#include "fl_crc32c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "fl_dataset.h"

#define CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t crc_table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* a * b modulo the polynomial, both in the reflected bit order of the CRC register (bit 31 is
 * x^0). */
static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
    }
    return p;
}

/* x^(8n) modulo the polynomial: the operator that pushes a register through n zero bytes. */
static uint32_t zeros_op(size_t n)
{
    uint32_t r = 1u << 31, sq = 1u << 23; /* x^0 and x^8 */
    while (n) {
        if (n & 1)
            r = gf2_mulmod(sq, r);
        sq = gf2_mulmod(sq, sq);
        n >>= 1;
    }
    return r;
}

/* Block lengths of the three-chain loop: long blocks for big records, short ones for the rest.
 * 64×64×3 raw records (12,288 bytes) are exactly three long blocks. */
#define CRC_LONG  4096
#define CRC_SHORT 256
static uint32_t shift_long[4][256], shift_short[4][256];

static void build_shift(uint32_t t[4][256], size_t n)
{
    uint32_t op = zeros_op(n);
    for (uint32_t j = 0; j < 4; j++)
        for (uint32_t b = 0; b < 256; b++)
            t[j][b] = gf2_mulmod(op, b << (8 * j));
}

static void build_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ ((c & 1u) ? CRC32C_POLY : 0u);
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
    build_shift(shift_long, CRC_LONG);
    build_shift(shift_short, CRC_SHORT);
}

static void ensure_table(void) { pthread_once(&table_once, build_table); }

static inline __attribute__((unused)) uint32_t shift(uint32_t t[4][256], uint32_t c)
{
    return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^ t[3][c >> 24];
}

uint32_t fl_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    ensure_table();
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8); /* little-endian host assumed, as for the whole on-disk format */
        v ^= c;
        c = crc_table[7][v & 0xFF] ^ crc_table[6][(v >> 8) & 0xFF] ^
            crc_table[5][(v >> 16) & 0xFF] ^ crc_table[4][(v >> 24) & 0xFF] ^
            crc_table[3][(v >> 32) & 0xFF] ^ crc_table[2][(v >> 40) & 0xFF] ^
            crc_table[1][(v >> 48) & 0xFF] ^ crc_table[0][(v >> 56) & 0xFF];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xFF];
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>

#define HW_INLINE __attribute__((target("sse4.2"), always_inline)) static inline

/* Three chains over blocks of n bytes at p, p+n, p+2n, 8 bytes at a time, for as long as three
 * blocks remain; when d is not NULL the bytes are also copied there (the loads are shared).
 * Returns the bytes consumed. n is a multiple of 8. */
HW_INLINE size_t crc3_blocks(uint64_t *cp, const uint8_t *p, uint8_t *d, size_t len, size_t n,
                             uint32_t t[4][256])
{
    uint64_t c = *cp;
    size_t done = 0;
    for (; len - done >= 3 * n; done += 3 * n) {
        const uint8_t *q = p + done;
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < n; i += 8) {
            uint64_t v0, v1, v2;
            memcpy(&v0, q + i, 8);
            memcpy(&v1, q + n + i, 8);
            memcpy(&v2, q + 2 * n + i, 8);
            if (d) {
                memcpy(d + done + i, &v0, 8);
                memcpy(d + done + n + i, &v1, 8);
                memcpy(d + done + 2 * n + i, &v2, 8);
            }
            c = _mm_crc32_u64(c, v0);
            c1 = _mm_crc32_u64(c1, v1);
            c2 = _mm_crc32_u64(c2, v2);
        }
        c = shift(t, shift(t, (uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
    }
    *cp = c;
    return done;
}

/* The raw register c after len bytes at p, copied to d unless d is NULL. Inlined into its two
 * callers, where d is NULL or not at compile time. */
HW_INLINE uint64_t crc_hw_update(uint64_t c, const uint8_t *p, uint8_t *d, size_t len)
{
    size_t k = crc3_blocks(&c, p, d, len, CRC_LONG, shift_long);
    k += crc3_blocks(&c, p + k, d ? d + k : NULL, len - k, CRC_SHORT, shift_short);
    for (; k + 8 <= len; k += 8) {
        uint64_t v;
        memcpy(&v, p + k, 8);
        if (d)
            memcpy(d + k, &v, 8);
        c = _mm_crc32_u64(c, v);
    }
    for (; k < len; k++) {
        if (d)
            d[k] = p[k];
        c = _mm_crc32_u8((uint32_t)c, p[k]);
    }
    return c;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw_impl(uint32_t crc, const void *data,
                                                                 size_t len)
{
    return ~(uint32_t)crc_hw_update((uint32_t)~crc, data, NULL, len);
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_copy_hw(uint8_t *d, const uint8_t *p,
                                                                 size_t len)
{
    return ~(uint32_t)crc_hw_update(0xffffffffu, p, d, len);
}

int fl_crc32c_hw_available(void) { return __builtin_cpu_supports("sse4.2") ? 1 : 0; }

uint32_t fl_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
    ensure_table();
    return crc32c_hw_impl(crc, data, len);
}
#else
int fl_crc32c_hw_available(void) { return 0; }
uint32_t fl_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
    return fl_crc32c_sw(crc, data, len);
}
#endif

/* 1 hardware, 2 table; decided on first use. */
static int crc_mode(void)
{
    static atomic_int mode; /* 0 unknown */
    int m = atomic_load_explicit(&mode, memory_order_relaxed);
    if (m == 0) {
        ensure_table();
        m = fl_crc32c_hw_available() ? 1 : 2;
        atomic_store_explicit(&mode, m, memory_order_relaxed);
    }
    return m;
}

uint32_t fl_crc32c(uint32_t crc, const void *data, size_t len)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc_mode() == 1)
        return crc32c_hw_impl(crc, data, len);
#else
    (void)crc_mode;
#endif
    return fl_crc32c_sw(crc, data, len);
}

uint32_t fl_crc32c_copy(void *dst, const void *src, size_t len)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc_mode() == 1)
        return crc32c_copy_hw(dst, src, len);
#endif
    memcpy(dst, src, len);
    return fl_crc32c_sw(0, src, len);
}
