/* order.c — epoch permutations (Fisher–Yates driven by the counter-based RNG) and the
 * rank/world split; see order.h. */
#include "order.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

int fl_order_plan_init(fl_order_plan *p, uint64_t n, fl_order order, uint32_t block,
                       uint32_t window, uint64_t seed, uint32_t rank, uint32_t world,
                       uint32_t batch, int drop_last, fl_error *err)
{
    if (world == 0)
        world = 1;
    if (batch == 0)
        return fl_error_set(err, FL_E_INVALID, "batch_size must be at least 1");
    if (rank >= world)
        return fl_error_set(err, FL_E_INVALID, "rank %u out of range for world %u", rank, world);
    if (order != FL_ORDER_SEQUENTIAL && order != FL_ORDER_RANDOM && order != FL_ORDER_QUASI)
        return fl_error_set(err, FL_E_INVALID, "unknown order %d", (int)order);
    if (n == 0)
        return fl_error_set(err, FL_E_INVALID, "dataset has no records");
    p->n = n;
    p->order = order;
    p->block = block ? block : 64;
    p->window = window ? window : 32;
    p->seed = seed;
    p->rank = rank;
    p->world = world;
    p->batch = batch;
    p->drop_last = drop_last;
    if (drop_last) {
        p->batches = (n / world) / batch;
    } else {
        uint64_t share = (n + world - 1) / world;
        p->batches = (share + batch - 1) / batch;
    }
    p->per_rank = p->batches * batch;
    if (p->batches == 0)
        return fl_error_set(err, FL_E_INVALID,
                            "%llu records give no full batch of %u per rank for world %u "
                            "with drop_last",
                            (unsigned long long)n, batch, world);
    return 0;
}

uint32_t fl_order_quasi_block(uint64_t mean_record_bytes)
{
    uint64_t b = mean_record_bytes ? FL_QUASI_BLOCK_BYTES / mean_record_bytes : FL_QUASI_BLOCK_MAX;
    return b < 1 ? 1 : b > FL_QUASI_BLOCK_MAX ? FL_QUASI_BLOCK_MAX : (uint32_t)b;
}

static inline void perm_set(fl_perm *p, uint64_t i, uint64_t v)
{
    if (p->p32)
        p->p32[i] = (uint32_t)v; /* v < n <= 2^32 */
    else
        p->p64[i] = v;
}

/* Fisher–Yates over perm[off, off + len), one loop per index width (the draws are the same). */
#define SHUFFLE(a)                                                                                 \
    for (uint64_t i = len; i > 1; i--) {                                                           \
        uint64_t j = fl_rng_below(r, i);                                                           \
        __typeof__(a[0]) t = a[i - 1];                                                             \
        a[i - 1] = a[j];                                                                           \
        a[j] = t;                                                                                  \
    }
static void shuffle(fl_perm *perm, uint64_t off, uint64_t len, fl_rng *r)
{
    if (perm->p32) {
        uint32_t *a = perm->p32 + off;
        SHUFFLE(a)
    } else {
        uint64_t *a = perm->p64 + off;
        SHUFFLE(a)
    }
}
#undef SHUFFLE

void fl_order_epoch_perm(const fl_order_plan *p, uint64_t epoch, fl_perm *perm)
{
    uint64_t n = p->n;
    if (p->order == FL_ORDER_SEQUENTIAL || p->order == FL_ORDER_RANDOM) {
        for (uint64_t i = 0; i < n; i++)
            perm_set(perm, i, i);
        if (p->order == FL_ORDER_RANDOM) {
            fl_rng r = fl_rng_init(p->seed, epoch, 0, FL_STREAM_PERM);
            shuffle(perm, 0, n, &r);
        }
        return;
    }
    /* Quasi-random: contiguous blocks (good locality on disk) in a random order, then the
     * samples of each window of `window` consecutive shuffled blocks shuffled together.
     * The shuffled block ids go into perm[0..nblocks) and are expanded into record runs from
     * the back: the run of the id at slot i starts at (sum of the i earlier run lengths) >= i,
     * so expansion never overwrites an id not yet expanded. Only the last block may be short. */
    uint64_t nblocks = (n + p->block - 1) / p->block;
    for (uint64_t b = 0; b < nblocks; b++)
        perm_set(perm, b, b);
    fl_rng rb = fl_rng_init(p->seed, epoch, 0, FL_STREAM_BLOCKS);
    shuffle(perm, 0, nblocks, &rb);
    uint64_t end = n;
    for (uint64_t i = nblocks; i-- > 0;) {
        uint64_t b = fl_perm_at(perm, i);
        uint64_t start_rec = b * p->block;
        uint64_t len = (b == nblocks - 1) ? n - start_rec : p->block;
        uint64_t dst = end - len;
        for (uint64_t k = len; k-- > 0;)
            perm_set(perm, dst + k, start_rec + k);
        end = dst;
    }
    uint64_t wrecs = p->block * p->window;
    for (uint64_t w = 0, pos = 0; pos < n; w++, pos += wrecs) {
        uint64_t len = n - pos < wrecs ? n - pos : wrecs;
        fl_rng rw = fl_rng_init(p->seed, epoch, w, FL_STREAM_WINDOW);
        shuffle(perm, pos, len, &rw);
    }
}

void fl_order_epoch(const fl_order_plan *p, uint64_t epoch, uint64_t *perm)
{
    fl_perm w = {NULL, perm, p->n};
    fl_order_epoch_perm(p, epoch, &w);
}

int fl_perm_alloc(fl_perm *perm, uint64_t n, int wide)
{
    memset(perm, 0, sizeof *perm);
    perm->n = n;
    if (!wide && n <= (1ull << 32))
        perm->p32 = malloc((n ? n : 1) * sizeof *perm->p32);
    else
        perm->p64 = malloc((n ? n : 1) * sizeof *perm->p64);
    return perm->p32 || perm->p64 ? 0 : -ENOMEM;
}

void fl_perm_free(fl_perm *perm)
{
    free(perm->p32);
    free(perm->p64);
    memset(perm, 0, sizeof *perm);
}
