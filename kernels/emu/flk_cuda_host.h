/* flk_cuda_host.h — the CUDA host shim: what the .cu files of kernels/ need from CUDA, given host
 * meanings, so the same kernel sources compile with the host C++ compiler (FLK_HOST_EMU) and run
 * on the CPU through the launcher (flk_emu_launch.cpp). tests/gpu/test_kernels.c runs against it
 * without a GPU.
 *
 * C part (also for the C tests): the runtime API subset the tests call (cudaMalloc = malloc, copies
 * = memcpy, events = a monotonic clock, one "device").
 * C++ part (kernel sources only): threadIdx/blockIdx/blockDim/gridDim, __shared__ (a static: the
 * blocks of a grid run one after another, the threads of a block share it), __syncthreads, warp
 * shuffles and votes (the 32 lanes of a warp meet, exchange, go on), atomics (plain read-modify-
 * write: one host thread runs the whole grid), __half/__nv_bfloat16 with exact
 * round-to-nearest-even conversions, and FLK_LAUNCH. Each CUDA thread of a block is a fiber with
 * its own stack, so a barrier suspends it where it stands (flk_emu_launch.cpp). Only what the
 * kernels use is provided: a kernel that needs more fails to compile here, visibly.
 * tests/gpu/README.md says what this cannot judge (coalescing, races between blocks, scheduling,
 * bank conflicts, intrinsic rounding). */
#ifndef FLK_CUDA_HOST_H
#define FLK_CUDA_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- runtime API (host side) ---------------------------------------------------------------- */

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorNoDevice = 100,
    cudaErrorLaunchFailure = 719, /* an emulated kernel broke a CUDA rule: see cudaGetErrorString */
} cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

typedef struct CUstream_st *cudaStream_t; /* every stream is the one in-order host queue */
typedef struct CUevent_st *cudaEvent_t;

struct cudaDeviceProp {
    char name[256];
    int major, minor;
};

/* Device memory is host memory (malloc: ASan sees overruns to the byte). */
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream);
/* Kernels run inside their launch: synchronizing only returns the sticky error of a failed launch.
 */
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
/* The last error (cleared) / without clearing it. */
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
/* For cudaErrorLaunchFailure: what the failed launch broke (kernel rule, block, thread). */
const char *cudaGetErrorString(cudaError_t e);
/* One device, named "host emulation", compute capability 0.0. */
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

#ifdef __cplusplus
}

/* ---- device side (kernel sources) -------------------------------------------------------------
 */

#include <math.h>
#include <string.h>

#include <tuple>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
/* one block at a time: every thread of the running block sees the same */
#define __shared__ static

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz)
    {}
};
typedef dim3 uint3;

/* Set by the launcher each time it switches to a CUDA thread. */
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;

/* Launcher entry points (flk_emu_launch.cpp). */
void flk_emu_run(dim3 grid, dim3 block, void (*body)(void *), void *ctx);
void flk_emu_syncthreads(const char *file, int line);
/* The calling lane publishes `v` and waits for every lane of `mask`; returns the 32 published
 * values (valid until this warp's next exchange but one). */
const uint64_t *flk_emu_warp_exchange(unsigned mask, uint64_t v);
int flk_emu_lane(void);

#define __syncthreads() flk_emu_syncthreads(__FILE__, __LINE__)

/* kernel<<<grid, block, 0, stream>>>(args): the arguments are converted to the kernel's parameter
 * types and copied at launch, as CUDA does. */
template <typename... P, typename... A>
inline void flk_emu_launch(void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t, A... args)
{
    struct call {
        void (*k)(P...);
        std::tuple<P...> a;
    } c{kernel, std::tuple<P...>(args...)};
    flk_emu_run(
        grid, block, [](void *p) { std::apply(((call *)p)->k, ((call *)p)->a); }, &c);
}
#define FLK_LAUNCH(kernel, grid, block, stream, ...)                                               \
    flk_emu_launch(kernel, grid, block, stream, __VA_ARGS__)

/* ---- warp intrinsics: every lane of `mask` must call them (as on sm_70+) ----------------------
 */

template <typename T> inline T flk_emu_shfl(unsigned mask, T v, int src)
{
    static_assert(sizeof(T) <= 8, "warp shuffle of more than 64 bits");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    const uint64_t *all = flk_emu_warp_exchange(mask, b);
    memcpy(&v, &all[src], sizeof v);
    return v;
}
/* width: lanes form segments of `width`; a source outside the caller's segment reads its own value
 */
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    int l = flk_emu_lane(), s = l ^ lane_mask;
    return flk_emu_shfl(mask, v, (s / width == l / width) ? s : l);
}
template <typename T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    int l = flk_emu_lane(), s = l + (int)delta;
    return flk_emu_shfl(mask, v, (s / width == l / width) ? s : l);
}
template <typename T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    int l = flk_emu_lane(), s = l - (int)delta;
    return flk_emu_shfl(mask, v, (s >= 0 && s / width == l / width) ? s : l);
}
template <typename T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    int l = flk_emu_lane();
    return flk_emu_shfl(mask, v, l / width * width + src % width);
}
inline unsigned __ballot_sync(unsigned mask, int pred)
{
    const uint64_t *all = flk_emu_warp_exchange(mask, pred != 0);
    unsigned b = 0;
    for (int l = 0; l < 32; l++)
        if ((mask >> l & 1u) && all[l])
            b |= 1u << l;
    return b;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }

/* ---- atomics: one host thread runs the grid, so a plain read-modify-write is atomic -----------
 */

template <typename T> inline T atomicAdd(T *p, T v)
{
    T o = *p;
    *p = o + v;
    return o;
}
template <typename T> inline T atomicMax(T *p, T v)
{
    T o = *p;
    *p = o < v ? v : o;
    return o;
}
template <typename T> inline T atomicMin(T *p, T v)
{
    T o = *p;
    *p = v < o ? v : o;
    return o;
}
template <typename T> inline T atomicExch(T *p, T v)
{
    T o = *p;
    *p = v;
    return o;
}
template <typename T> inline T atomicCAS(T *p, T cmp, T v)
{
    T o = *p;
    if (o == cmp)
        *p = v;
    return o;
}

/* ---- math the device library has and the host lacks (host rounding: see tests/gpu/README.md) --
 */

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

/* ---- fp16 and bf16: storage types with exact round-to-nearest-even conversions ---------------
 * Written as arithmetic (frexp, nearbyint in the default round-to-nearest-even mode), not bit
 * tricks, so they are an independent check of the CPU reference's bit-level cpu_half.c. NaN gives
 * 0x7FFF, as CUDA's conversions do. */

struct __half {
    uint16_t x;
};
struct __nv_bfloat16 {
    uint16_t x;
};

/* |f| rounded to `mbits` fraction bits with exponent range [emin, emax]: the bits of a binary16
 * (mbits 10) or bfloat16 (mbits 7) value, overflow to infinity. */
inline uint16_t flk_emu_round_bits(float f, int mbits, int emin, int emax)
{
    uint16_t sign = signbit(f) ? 0x8000u : 0u, inf = (uint16_t)(((emax - emin + 2) << mbits));
    float a = fabsf(f);
    if (isnan(f))
        return 0x7FFFu;
    if (isinf(f))
        return sign | inf;
    if (a == 0.0f)
        return sign;
    int e;
    frexpf(a, &e);
    int q = e - 1 < emin ? emin : e - 1; /* a in [2^q, 2^(q+1)); below emin: subnormal quantum */
    double m = nearbyint(ldexp((double)a, mbits - q));
    if (m >= ldexp(2.0, mbits)) { /* rounded up to the next power of two */
        m *= 0.5;
        q++;
    }
    if (q > emax)
        return sign | inf;
    if (m < ldexp(1.0, mbits))
        return sign | (uint16_t)m; /* subnormal */
    return sign | (uint16_t)(((q - emin + 1) << mbits) | ((uint32_t)m - (1u << mbits)));
}
inline float flk_emu_bits_value(uint16_t h, int mbits, int emin, int emax)
{
    int ef = (h & 0x7FFF) >> mbits, man = h & ((1 << mbits) - 1);
    float v;
    if (ef == emax - emin + 2)
        v = man ? NAN : INFINITY;
    else if (ef == 0)
        v = ldexpf((float)man, emin - mbits);
    else
        v = ldexpf((float)(man | (1 << mbits)), ef + emin - 1 - mbits);
    return (h & 0x8000u) ? -v : v;
}
inline __half __float2half_rn(float f) { return __half{flk_emu_round_bits(f, 10, -14, 15)}; }
inline float __half2float(__half h) { return flk_emu_bits_value(h.x, 10, -14, 15); }
inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    return __nv_bfloat16{flk_emu_round_bits(f, 7, -126, 127)};
}
inline float __bfloat162float(__nv_bfloat16 h) { return flk_emu_bits_value(h.x, 7, -126, 127); }

#endif /* __cplusplus */
#endif
