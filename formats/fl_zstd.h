/* fl_zstd.h — internal: a bounded pool of zstd decompression contexts shared by the threads
 * that read one dataset (lock-free slot claiming; no allocation once each slot is warm). */
#ifndef FL_ZSTD_H
#define FL_ZSTD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fl_error.h"

#define FL_DCTX_SLOTS 64

struct ZSTD_DCtx_s;
struct ZSTD_DDict_s;

typedef struct fl_dctx_pool {
    atomic_int busy[FL_DCTX_SLOTS];
    struct ZSTD_DCtx_s *ctx[FL_DCTX_SLOTS]; /* created lazily by the slot's current holder */
    atomic_uint hint;                       /* where the next claim starts scanning */
} fl_dctx_pool;

void fl_dctx_pool_init(fl_dctx_pool *p);
void fl_dctx_pool_destroy(fl_dctx_pool *p);

/* Decompress one zstd frame `src` into dst (capacity cap) with `ddict` (may be NULL); the result
 * must be exactly `expect` bytes. `what` names the record for the error message.
 * Errors: FL_E_DECODE, -ENOMEM. */
int fl_zstd_decompress(fl_dctx_pool *p, const struct ZSTD_DDict_s *ddict, const void *src,
                       size_t src_len, void *dst, size_t cap, size_t expect, const char *what,
                       fl_error *err);

#endif
