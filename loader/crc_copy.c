/* crc_copy.c — fused copy + CRC32C: with SSE4.2 the crc32 instruction's 3-cycle latency leaves
 * room for the load/store of the copy, so both cost about what the CRC alone costs; elsewhere
 * it is fl_crc32c followed by memcpy. Same value as fl_crc32c(0, src, len). */
#include "crc_copy.h"

#include <string.h>

#include "fl_dataset.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc_copy_hw(uint8_t *d, const uint8_t *s,
                                                              size_t len)
{
    uint64_t c = 0xffffffffu;
    while (len >= 32) {
        uint64_t v0, v1, v2, v3;
        memcpy(&v0, s, 8);
        memcpy(&v1, s + 8, 8);
        memcpy(&v2, s + 16, 8);
        memcpy(&v3, s + 24, 8);
        memcpy(d, &v0, 8);
        memcpy(d + 8, &v1, 8);
        memcpy(d + 16, &v2, 8);
        memcpy(d + 24, &v3, 8);
        c = _mm_crc32_u64(c, v0);
        c = _mm_crc32_u64(c, v1);
        c = _mm_crc32_u64(c, v2);
        c = _mm_crc32_u64(c, v3);
        s += 32;
        d += 32;
        len -= 32;
    }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        memcpy(d, &v, 8);
        c = _mm_crc32_u64(c, v);
        s += 8;
        d += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--) {
        *d++ = *s;
        c32 = _mm_crc32_u8(c32, *s++);
    }
    return ~c32;
}

uint32_t fl_crc32c_copy(void *dst, const void *src, size_t len)
{
    if (__builtin_cpu_supports("sse4.2"))
        return crc_copy_hw(dst, src, len);
    memcpy(dst, src, len);
    return fl_crc32c(0, src, len);
}
#else
uint32_t fl_crc32c_copy(void *dst, const void *src, size_t len)
{
    memcpy(dst, src, len);
    return fl_crc32c(0, src, len);
}
#endif
