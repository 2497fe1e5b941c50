/* kcommon.cuh — shared device helpers for the kernels: fp32 load/store of the three storage types,
 * the dtype → template dispatch, the launch macro, and grid sizing. Private to kernels/ (not
 * installed). */
#ifndef FL_KCOMMON_CUH
#define FL_KCOMMON_CUH

#ifdef FLK_HOST_EMU
#include "flk_cuda_host.h" /* the same sources compiled for the CPU: kernels/emu */
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif
#include <stdint.h>

#include "fl_kernels.h"

/* kernel<<<grid, block, 0, stream>>>(args), written so the host emulation can run it too. */
#ifndef FLK_LAUNCH
#define FLK_LAUNCH(kernel, grid, block, stream, ...) kernel<<<grid, block, 0, stream>>>(__VA_ARGS__)
#endif

__device__ __forceinline__ float flk_ld(const float *p) { return *p; }
__device__ __forceinline__ float flk_ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float flk_ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }

__device__ __forceinline__ void flk_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void flk_st(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void flk_st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* Run `body` with `T` bound to the C++ type of `dt` (the statements may contain commas). */
#define FLK_DISPATCH(dt, T, ...)                                                                   \
    switch (dt) {                                                                                  \
    case FLK_F32: {                                                                                \
        typedef float T;                                                                           \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case FLK_F16: {                                                                                \
        typedef __half T;                                                                          \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case FLK_BF16: {                                                                               \
        typedef __nv_bfloat16 T;                                                                   \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    default: return cudaErrorInvalidValue;                                                         \
    }

/* Blocks for a grid-stride loop over n elements: enough to fill an H200 (132 SMs) several times
 * over, never more than needed. */
static inline unsigned flk_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    if (b > 132 * 16)
        b = 132 * 16;
    if (b == 0)
        b = 1;
    return (unsigned)b;
}

/* Warp sum (all lanes get the result). */
__device__ __forceinline__ float flk_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float flk_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#endif
