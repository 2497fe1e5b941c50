/* fl_crc32c.h — internal: the two CRC32C implementations behind fl_crc32c(), exposed so a test
 * can check both against known vectors whatever the CPU, and the fused copy + CRC. */
#ifndef FL_CRC32C_H
#define FL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Table (slice-by-8) implementation; always available. */
uint32_t fl_crc32c_sw(uint32_t crc, const void *data, size_t len);
/* SSE4.2 implementation; call only when fl_crc32c_hw_available() (falls back to the table on
 * non-x86 builds). */
uint32_t fl_crc32c_hw(uint32_t crc, const void *data, size_t len);
int fl_crc32c_hw_available(void);

/* Copy len bytes from src to dst (not overlapping) and return fl_crc32c(0, src, len), reading
 * the source once: for raw records that go unchanged into a batch. */
uint32_t fl_crc32c_copy(void *dst, const void *src, size_t len);

#endif
