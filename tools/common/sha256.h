/* sha256.h — a small streaming SHA-256 (FIPS 180-4) used by `fastload digest` to fingerprint
 * batches, so scripts can compare streams across worker counts, I/O modes and the Python binding,
 * and by `packdata pack` to fingerprint its input list (the manifest's options.inputs). */
#ifndef FASTLOAD_CLI_SHA256_H
#define FASTLOAD_CLI_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t total;  /* bytes hashed so far */
    uint8_t buf[64]; /* pending partial block */
    size_t buf_len;
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
/* Write the 32-byte digest to out; the context must be re-initialised before reuse. */
void sha256_final(sha256_ctx *c, uint8_t out[32]);
/* Lower-case hex of a 32-byte digest into hex (65 bytes with the NUL). */
void sha256_hex(const uint8_t digest[32], char hex[65]);

#endif
