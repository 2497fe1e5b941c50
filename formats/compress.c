/* compress.c — zstd for records: dictionary training, per-thread compressors (frames without
 * dictionary ID / content size / checksum: the index already carries raw_len and a CRC32C),
 * and the pooled decompression contexts used by the reader. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zdict.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "fl_writer.h"
#include "fl_zstd.h"

struct fl_compressor {
    ZSTD_CCtx *cctx;
    ZSTD_CDict *cdict;
};

int fl_zstd_train_dictionary(const void *samples, const size_t *sizes, unsigned n, void *dict,
                             size_t dict_cap, size_t *dict_len, fl_error *err)
{
    *dict_len = 0;
    if (!samples || !sizes || !dict || n == 0 || dict_cap < 256)
        return fl_error_set(err, FL_E_INVALID,
                            "zstd dictionary: need samples and >= 256 bytes of room");
    size_t r = ZDICT_trainFromBuffer(dict, dict_cap, samples, sizes, n);
    if (ZDICT_isError(r))
        return fl_error_set(err, FL_E_INVALID, "zstd dictionary training failed on %u samples: %s",
                            n, ZDICT_getErrorName(r));
    *dict_len = r;
    return 0;
}

int fl_compressor_create(int level, const void *dict, size_t dict_len, fl_compressor **out,
                         fl_error *err)
{
    *out = NULL;
    if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
        return fl_error_set(err, FL_E_INVALID, "zstd level %d out of range [%d, %d]", level,
                            ZSTD_minCLevel(), ZSTD_maxCLevel());
    fl_compressor *c = calloc(1, sizeof *c);
    if (!c)
        return fl_error_set(err, -ENOMEM, "out of memory creating a zstd compressor");
    c->cctx = ZSTD_createCCtx();
    if (!c->cctx)
        goto nomem;
    if (dict && dict_len) {
        c->cdict = ZSTD_createCDict(dict, dict_len, level);
        if (!c->cdict)
            goto nomem;
        ZSTD_CCtx_refCDict(c->cctx, c->cdict);
    } else {
        ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, level);
    }
    /* Small records: every header byte counts. raw_len and CRC32C live in the index. */
    ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_contentSizeFlag, 0);
    ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_checksumFlag, 0);
    ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_dictIDFlag, 0);
    *out = c;
    return 0;
nomem:
    fl_compressor_free(c);
    return fl_error_set(err, -ENOMEM, "out of memory creating a zstd compressor");
}

size_t fl_compress_bound(size_t len) { return ZSTD_compressBound(len); }

int fl_compressor_compress(fl_compressor *c, const void *src, size_t len, void *dst, size_t cap,
                           size_t *out_len, fl_error *err)
{
    size_t r = ZSTD_compress2(c->cctx, dst, cap, src, len);
    if (ZSTD_isError(r)) {
        *out_len = 0;
        return fl_error_set(
            err, ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ? FL_E_RANGE : FL_E_INVALID,
            "zstd compression of %zu bytes failed: %s", len, ZSTD_getErrorName(r));
    }
    *out_len = r;
    return 0;
}

void fl_compressor_free(fl_compressor *c)
{
    if (!c)
        return;
    ZSTD_freeCCtx(c->cctx);
    ZSTD_freeCDict(c->cdict);
    free(c);
}

/* ---- decompression pool ------------------------------------------------------------------- */

void fl_dctx_pool_init(fl_dctx_pool *p)
{
    for (int i = 0; i < FL_DCTX_SLOTS; i++) {
        atomic_init(&p->busy[i], 0);
        p->ctx[i] = NULL;
    }
    atomic_init(&p->hint, 0);
}

void fl_dctx_pool_destroy(fl_dctx_pool *p)
{
    for (int i = 0; i < FL_DCTX_SLOTS; i++) {
        ZSTD_freeDCtx(p->ctx[i]);
        p->ctx[i] = NULL;
    }
}

int fl_zstd_decompress(fl_dctx_pool *p, const struct ZSTD_DDict_s *ddict, const void *src,
                       size_t src_len, void *dst, size_t cap, size_t expect, const char *what,
                       fl_error *err)
{
    if (cap < expect)
        return fl_error_set(err, FL_E_RANGE, "%s: output buffer %zu bytes, record needs %zu", what,
                            cap, expect);
    /* Claim a free slot (acquire pairs with the release below, so the holder sees the slot's
     * context fully built by the previous holder). More than FL_DCTX_SLOTS concurrent callers
     * fall back to a temporary context. */
    /* Each thread starts at the slot it used last, so steady-state claims do not contend. */
    static __thread unsigned last_slot = ~0u;
    int slot = -1;
    unsigned start = last_slot;
    if (start == ~0u)
        start = atomic_fetch_add_explicit(&p->hint, 1, memory_order_relaxed);
    for (int k = 0; k < FL_DCTX_SLOTS; k++) {
        int i = (int)((start + (unsigned)k) % FL_DCTX_SLOTS);
        int expected = 0;
        if (atomic_compare_exchange_strong_explicit(&p->busy[i], &expected, 1, memory_order_acquire,
                                                    memory_order_relaxed)) {
            slot = i;
            last_slot = (unsigned)i;
            break;
        }
    }
    ZSTD_DCtx *d;
    if (slot >= 0) {
        if (!p->ctx[slot])
            p->ctx[slot] = ZSTD_createDCtx();
        d = p->ctx[slot];
    } else {
        d = ZSTD_createDCtx();
    }
    int rc = 0;
    if (!d) {
        rc = fl_error_set(err, -ENOMEM, "%s: out of memory for a zstd context", what);
    } else {
        /* Exactly `expect` bytes of room: a frame that would produce more fails here. */
        size_t r = ddict ? ZSTD_decompress_usingDDict(d, dst, expect, src, src_len, ddict)
                         : ZSTD_decompressDCtx(d, dst, expect, src, src_len);
        if (ZSTD_isError(r))
            rc = fl_error_set(err, FL_E_DECODE, "%s: corrupt zstd frame: %s", what,
                              ZSTD_getErrorName(r));
        else if (r != expect)
            rc = fl_error_set(err, FL_E_DECODE, "%s: zstd frame yields %zu bytes, index says %zu",
                              what, r, expect);
    }
    if (slot >= 0)
        atomic_store_explicit(&p->busy[slot], 0, memory_order_release);
    else
        ZSTD_freeDCtx(d);
    return rc;
}
