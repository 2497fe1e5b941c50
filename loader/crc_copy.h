/* crc_copy.h — copy bytes and compute their CRC32C in the same pass (the source is read once),
 * for raw records that go unchanged from the mapping into the batch. Internal. */
#ifndef FL_CRC_COPY_H
#define FL_CRC_COPY_H

#include <stddef.h>
#include <stdint.h>

/* Copy len bytes from src to dst (not overlapping) and return fl_crc32c(0, src, len). */
uint32_t fl_crc32c_copy(void *dst, const void *src, size_t len);

#endif
