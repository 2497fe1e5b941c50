/* fl_splitmix64.h — the one splitmix64 of fastload (common/): its finalizer as a counter hash
 * (the loader's counter-based streams, the augmentation draws of the CPU backend and of the GPU
 * input kernel) and the sequential generator (model initialisation, packdata --shuffle).
 * Header-only, no state; under nvcc the functions are also __device__, so CUDA kernels and the
 * CPU draw the same bits. Changing a constant here changes every stream, digest and golden hash. */
#ifndef FL_SPLITMIX64_H
#define FL_SPLITMIX64_H

#include <stdint.h>

#if defined(__CUDACC__)
#define FL_SPLITMIX_FN static inline __host__ __device__
#else
#define FL_SPLITMIX_FN static inline
#endif

/* splitmix64's output function applied to z + golden gamma: a bijective 64-bit mix with full
 * avalanche (passes BigCrush as a hash of a counter). */
FL_SPLITMIX_FN uint64_t fl_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The sequential splitmix64 generator: the next 64 bits of the stream whose state is *state
 * (advances the state by the golden gamma; any seed is a valid state). */
FL_SPLITMIX_FN uint64_t fl_splitmix64_next(uint64_t *state)
{
    uint64_t z = *state;
    *state += 0x9E3779B97F4A7C15ull;
    return fl_mix64(z);
}

#endif
