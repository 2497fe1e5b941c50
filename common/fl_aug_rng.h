/* fl_aug_rng.h — the one augmentation draw of the backends' input stages (random crop with
 * padding and horizontal flip): fl_aug_crop_flip is called by the CPU backend's input stage
 * (trainer/cpu/cpu_layers.c) and, compiled by nvcc as __host__ __device__, by the GPU input kernel
 * (kernels/input.cu), so both augment every sample identically. Plain C, header-only, no state:
 * the draw for a sample is a pure function of (seed, epoch, record index). The loader's own
 * random-resized-crop / center / flip parameters, drawn by its decode workers, are another
 * thing (loader/augment.h). In common/ because its users (trainer, kernels) share no other layer.
 */
#ifndef FL_AUG_RNG_H
#define FL_AUG_RNG_H

#include <stdint.h>

#include "fl_splitmix64.h" /* fl_mix64 (common/) */

#if defined(__CUDACC__)
#define FL_AUG_FN static inline __host__ __device__
#else
#define FL_AUG_FN static inline
#endif

/* 64 random bits for (seed, epoch, index): mix(mix(mix(seed) ^ epoch) ^ index). Changing it
 * changes every trainer's augmented pixels and golden losses: tests/loader/test_loader_order pins
 * the draws. */
FL_AUG_FN uint64_t fl_aug_hash(uint64_t seed, uint64_t epoch, uint64_t index)
{
    return fl_mix64(fl_mix64(fl_mix64(seed) ^ epoch) ^ index);
}

/* Crop offsets and flip for one sample: dy, dx in [0, 2·pad] are the top-left corner of the
 * h × w window inside the (h + 2pad) × (w + 2pad) padded image, out[y][x] = in[y + dy - pad]
 * [x + dx - pad] (padding where outside); *flip is 0 or 1 (0 when flip_enabled is 0) and mirrors
 * the cropped window, out[y][x] = crop[y][w - 1 - x]. pad = 0 gives dy = dx = 0. Uses 16-bit
 * fields of the hash, so the modulo bias is below 2^-10 for pad ≤ 32. */
FL_AUG_FN void fl_aug_crop_flip(uint64_t seed, uint64_t epoch, uint64_t index, int pad,
                                int flip_enabled, int *dy, int *dx, int *flip)
{
    uint64_t r = fl_aug_hash(seed, epoch, index);
    uint32_t span = (uint32_t)(2 * pad + 1);
    *dy = pad > 0 ? (int)((uint32_t)(r & 0xFFFF) % span) : 0;
    *dx = pad > 0 ? (int)((uint32_t)((r >> 16) & 0xFFFF) % span) : 0;
    *flip = flip_enabled ? (int)((r >> 32) & 1) : 0;
}

/* Source coordinate for output coordinate `o` (0 ≤ o < n) after padding and offset `d`: returns
 * the index into the unpadded axis of length n, or −1 for a zero-padded position. Reflect padding
 * mirrors without repeating the edge (as numpy 'reflect' / torch 'reflect'); pad must be < n. */
FL_AUG_FN int fl_aug_src(int o, int d, int pad, int n, int reflect)
{
    int s = o + d - pad;
    if (s < 0)
        return reflect ? -s : -1;
    if (s >= n)
        return reflect ? 2 * (n - 1) - s : -1;
    return s;
}

#endif
