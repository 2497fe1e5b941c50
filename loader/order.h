/* order.h — which record goes where: per-epoch permutations (sequential, random, quasi-random)
 * and the data-parallel split into equal rank shares. Everything is a pure function of
 * (seed, epoch), so any worker, any process and any resumed run computes the same order. Internal.
 */
#ifndef FL_ORDER_H
#define FL_ORDER_H

#include <stdint.h>

#include "fastload.h"

typedef struct fl_order_plan {
    uint64_t n; /* records in the dataset */
    fl_order order;
    uint64_t block;  /* FL_ORDER_QUASI: records per block */
    uint64_t window; /* FL_ORDER_QUASI: blocks shuffled together */
    uint64_t seed;
    uint32_t rank, world;
    uint32_t batch; /* samples per batch */
    int drop_last;
    uint64_t per_rank; /* samples this rank gets per epoch (a multiple of batch) */
    uint64_t batches;  /* batches per epoch for this rank */
} fl_order_plan;

/* Set up the plan. The split follows PyTorch's DistributedSampler: the epoch sequence is dealt
 * round-robin, position j of rank r being sequence position j*world + r. drop_last: each rank
 * gets floor(floor(n/world)/batch) full batches (no record twice). Otherwise each rank gets
 * ceil(ceil(n/world)/batch) full batches, positions past n wrapping to the sequence start.
 * Errors: FL_E_INVALID (zero batch, rank >= world, no batch at all) with a message. */
int fl_order_plan_init(fl_order_plan *p, uint64_t n, fl_order order, uint32_t block,
                       uint32_t window, uint64_t seed, uint32_t rank, uint32_t world,
                       uint32_t batch, int drop_last, fl_error *err);

/* Fill perm[0..n) with the epoch's sequence of record indices (a permutation of 0..n-1). */
void fl_order_epoch(const fl_order_plan *p, uint64_t epoch, uint64_t *perm);

/* An epoch's sequence held in 4 bytes a record when every index fits (under 2^32 records), else
 * in 8: the same sequence either way. */
typedef struct fl_perm {
    uint32_t *p32; /* one of the two is set */
    uint64_t *p64;
    uint64_t n;
} fl_perm;

/* Room for n indices, 32-bit ones when n <= 2^32 unless `wide`. Returns 0 or -ENOMEM. */
int fl_perm_alloc(fl_perm *perm, uint64_t n, int wide);
void fl_perm_free(fl_perm *perm);
/* fl_order_epoch into an fl_perm of p->n indices. */
void fl_order_epoch_perm(const fl_order_plan *p, uint64_t epoch, fl_perm *perm);
static inline uint64_t fl_perm_at(const fl_perm *perm, uint64_t i)
{
    return perm->p32 ? perm->p32[i] : perm->p64[i];
}

/* Position in the epoch sequence (before wrapping) of sample k of this rank's batch `batch`;
 * the record is perm[pos % n]. Sequential and random orders deal the sequence round-robin
 * (sample j of rank r at j*world + r, as PyTorch's DistributedSampler). The quasi-random order
 * gives each rank one contiguous run of per_rank positions (r*per_rank + j): a rank then uses
 * whole windows, so each block's records go to one rank (two where a share's edge cuts a
 * window) and a rank's coalesced extent reads (block_reader.h) carry no other rank's records.
 * Unique per (rank, batch, k) within an epoch, so it also keys the sample's augmentation
 * randomness. With one rank both rules give j. */
static inline uint64_t fl_order_pos(const fl_order_plan *p, uint64_t batch, uint32_t k)
{
    uint64_t j = batch * p->batch + k;
    if (p->order == FL_ORDER_QUASI)
        return p->rank * p->per_rank + j;
    return j * p->world + p->rank;
}

/* Records per quasi block when the caller gives none (quasi_block 0): as many as fill
 * FL_QUASI_BLOCK_BYTES at the data set's mean stored record size, at most 64 and at least 1.
 * Small records get 64 (one block's worth of shuffling); large ones get blocks that are still
 * one read of about 1 MiB, so a window of 32 blocks stays a few tens of MiB (147 KiB records: 6
 * per block, a 28 MiB window, where 64 would need 300 MiB). A function of the data set alone,
 * so the order is the same on every machine. */
#define FL_QUASI_BLOCK_BYTES (1u << 20)
#define FL_QUASI_BLOCK_MAX   64u
uint32_t fl_order_quasi_block(uint64_t mean_record_bytes);

#endif
