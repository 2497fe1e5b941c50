/* rng.h — counter-based random numbers: every draw is a pure function of (seed, epoch, index,
 * stream, counter), so shuffles and augmentations do not depend on which thread computes them or
 * in what order. splitmix64's finalizer is the mixing function (passes BigCrush as a hash of a
 * counter); Lemire's multiply-shift with rejection gives unbiased bounded integers. Internal. */
#ifndef FL_RNG_H
#define FL_RNG_H

#include <stdint.h>

#include "fl_splitmix64.h" /* fl_mix64 */

/* Distinct streams so that the same (seed, epoch, index) feeds independent sequences. */
enum { FL_STREAM_PERM = 1, FL_STREAM_BLOCKS = 2, FL_STREAM_WINDOW = 3, FL_STREAM_AUGMENT = 4 };

typedef struct fl_rng {
    uint64_t key;
    uint64_t ctr;
} fl_rng;

static inline fl_rng fl_rng_init(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t stream)
{
    fl_rng r;
    r.key = fl_mix64(fl_mix64(fl_mix64(seed ^ fl_mix64(stream)) ^ epoch) ^ index);
    r.ctr = 0;
    return r;
}

static inline uint64_t fl_rng_next(fl_rng *r)
{
    return fl_mix64(r->key + (r->ctr++) * 0xd1b54a32d192ed03ull);
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double fl_rng_uniform(fl_rng *r) { return (double)(fl_rng_next(r) >> 11) * 0x1p-53; }

/* Uniform integer in [0, n), unbiased; n > 0. */
static inline uint64_t fl_rng_below(fl_rng *r, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)fl_rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = (0 - n) % n;
        while (lo < t) {
            m = (unsigned __int128)fl_rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

#endif
