/* order.h — which record goes where: per-epoch permutations (sequential, random, quasi-random)
 * and the data-parallel split into equal rank shares. Everything is a pure function of
 * (seed, epoch), so any worker, any process and any resumed run computes the same order. Internal. */
#ifndef FL_ORDER_H
#define FL_ORDER_H

#include <stdint.h>

#include "fastload.h"

typedef struct fl_order_plan {
    uint64_t n;          /* records in the dataset */
    fl_order order;
    uint64_t block;      /* FL_ORDER_QUASI: records per block */
    uint64_t window;     /* FL_ORDER_QUASI: blocks shuffled together */
    uint64_t seed;
    uint32_t rank, world;
    uint32_t batch;      /* samples per batch */
    int drop_last;
    uint64_t per_rank;   /* samples this rank gets per epoch (a multiple of batch) */
    uint64_t batches;    /* batches per epoch for this rank */
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

/* Position in the epoch sequence (before wrapping) of sample k of this rank's batch `batch`;
 * the record is perm[pos % n]. Unique per (rank, batch, k) within an epoch, so it also keys
 * the sample's augmentation randomness. */
static inline uint64_t fl_order_pos(const fl_order_plan *p, uint64_t batch, uint32_t k)
{
    return (batch * p->batch + k) * p->world + p->rank;
}

#endif
