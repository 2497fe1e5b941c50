/* kcommon.cuh — shared device helpers for the kernels: fp32 load/store of the three storage types,
 * the dtype → template dispatch, and grid sizing. Private to kernels/ (not installed). */
#ifndef FL_KCOMMON_CUH
#define FL_KCOMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "fl_kernels.h"

__device__ __forceinline__ float flk_ld(const float *p) { return *p; }
__device__ __forceinline__ float flk_ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float flk_ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }

__device__ __forceinline__ void flk_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void flk_st(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void flk_st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* Run `body` with `T` bound to the C++ type of `dt` (the statements may contain commas). */
#define FLK_DISPATCH(dt, T, ...)                                                                        \
    switch (dt) {                                                                                  \
    case FLK_F32: { typedef float T; __VA_ARGS__; } break;                                                \
    case FLK_F16: { typedef __half T; __VA_ARGS__; } break;                                               \
    case FLK_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break;                                       \
    default: return cudaErrorInvalidValue;                                                         \
    }

/* Blocks for a grid-stride loop over n elements: enough to fill an H200 (132 SMs) several times
 * over, never more than needed. */
static inline unsigned flk_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    if (b > 132 * 16) b = 132 * 16;
    if (b == 0) b = 1;
    return (unsigned)b;
}

/* Warp sum (all lanes get the result). */
__device__ __forceinline__ float flk_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float flk_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#endif
