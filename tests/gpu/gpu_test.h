/* gpu_test.h — helpers shared by the GPU tests: skip (exit 77) without a GPU, CUDA check macro with
 * file:line, device upload/download of fp32 data stored as fp32/fp16/bf16 (through the CPU
 * reference's conversions, cpu_half.h), precision-scaled comparison against the CPU reference
 * (trainer/cpu), NCHW <-> NHWC on the host, and a small deterministic RNG. Checks are fl_check.h's
 * (EXPECTF, counted). Header-only (static). */
#ifndef FL_GPU_TEST_H
#define FL_GPU_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_half.h"
#include "fl_check.h"
#include "fl_kernels.h" /* the CUDA runtime API, or the host emulation's (FLK_HOST_EMU) */

#define GT_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                   \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Exit 77 with a clear line when no usable GPU is present. */
static inline void gt_require_gpu(const char *test)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP %s: no GPU (%s)\n", test,
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0 devices");
        exit(FL_CHECK_SKIP);
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        printf("%s: on %s (cc %d.%d)\n", test, prop.name, prop.major, prop.minor);
}

static uint64_t gt_rng_state = 0x1234567ull;
static inline double gt_uniform(void)
{ /* [0, 1) */
    gt_rng_state = gt_rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(gt_rng_state >> 11) * (1.0 / 9007199254740992.0);
}
static inline float gt_randn(void)
{
    double u1 = gt_uniform() + 1e-12, u2 = gt_uniform();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static inline float *gt_randn_array(size_t n, float scale, float offset)
{
    float *x = (float *)malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++)
        x[i] = offset + scale * gt_randn();
    return x;
}

/* n floats stored as dt (fp32 copies) and back, through the CPU reference's conversions. */
static inline void gt_pack(const float *src, void *dst, flk_dtype dt, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == FLK_F32)
            ((float *)dst)[i] = src[i];
        else if (dt == FLK_F16)
            ((uint16_t *)dst)[i] = cpu_f32_to_f16(src[i]);
        else
            ((uint16_t *)dst)[i] = cpu_f32_to_bf16(src[i]);
    }
}
static inline void gt_unpack(const void *src, flk_dtype dt, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == FLK_F32)
            dst[i] = ((const float *)src)[i];
        else if (dt == FLK_F16)
            dst[i] = cpu_f16_to_f32(((const uint16_t *)src)[i]);
        else
            dst[i] = cpu_bf16_to_f32(((const uint16_t *)src)[i]);
    }
}
/* x rounded to dt and back to fp32, in place (what storing in dt does). */
static inline void gt_round(float *x, flk_dtype dt, size_t n)
{
    if (dt == FLK_F16)
        cpu_round_f16(x, n);
    else if (dt == FLK_BF16)
        cpu_round_bf16(x, n);
}
/* Unit roundoff of dt: 2^-24 fp32, 2^-11 fp16, 2^-8 bf16. */
static inline double gt_eps(flk_dtype dt)
{
    return dt == FLK_F32 ? ldexp(1.0, -24) : dt == FLK_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
}

/* NCHW <-> NHWC of n x c x h x w floats (to_nchw: src is NHWC). The CPU reference layers are NCHW,
 * the kernels NHWC; an [rows][c] tensor needs no transpose (NCHW with h = w = 1). */
static inline void gt_transpose_chw(const float *src, float *dst, int n, int c, int h, int w,
                                    int to_nchw)
{
    int hw = h * w;
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < hw; p++) {
                size_t nchw = ((size_t)b * c + ch) * hw + p, nhwc = ((size_t)b * hw + p) * c + ch;
                if (to_nchw)
                    dst[nchw] = src[nhwc];
                else
                    dst[nhwc] = src[nchw];
            }
}
static inline float *gt_to_nhwc(const float *nchw, int n, int c, int h, int w)
{
    float *o = (float *)malloc(sizeof(float) * (size_t)n * c * h * w + 4);
    gt_transpose_chw(nchw, o, n, c, h, w, 0);
    return o;
}
static inline float *gt_to_nchw(const float *nhwc, int n, int c, int h, int w)
{
    float *o = (float *)malloc(sizeof(float) * (size_t)n * c * h * w + 4);
    gt_transpose_chw(nhwc, o, n, c, h, w, 1);
    return o;
}

/* Device copy of n floats stored as dt (rounding happens here; round the host array with
 * gt_round first to give the reference the same inputs). */
static inline void *gt_upload(const float *x, size_t n, flk_dtype dt)
{
    size_t bytes = n * flk_dtype_size(dt) + 16;
    void *h = malloc(bytes), *d = NULL;
    gt_pack(x, h, dt, n);
    GT_CUDA(cudaMalloc(&d, bytes));
    GT_CUDA(cudaMemcpy(d, h, n * flk_dtype_size(dt), cudaMemcpyHostToDevice));
    free(h);
    return d;
}
static inline void *gt_alloc(size_t bytes)
{
    void *d = NULL;
    GT_CUDA(cudaMalloc(&d, bytes + 16));
    GT_CUDA(cudaMemset(d, 0, bytes + 16));
    return d;
}
static inline float *gt_download(const void *d, size_t n, flk_dtype dt)
{
    GT_CUDA(cudaDeviceSynchronize());
    size_t bytes = n * flk_dtype_size(dt);
    void *h = malloc(bytes + 16);
    float *x = (float *)malloc(n * sizeof(float) + 16);
    GT_CUDA(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    gt_unpack(h, dt, x, n);
    free(h);
    return x;
}

/* |got − want| ≤ (tol_rel · eps(dt) + 32 · 2^-24) · (|want| + scale) for all i (the second term is
 * the fp32 arithmetic every kernel does whatever it stores; tol_rel 0 demands exact equality);
 * reports the worst element. `scale` is the typical magnitude of the data (slack near 0). */
static inline int gt_close(const char *what, const float *got, const float *want, size_t n,
                           flk_dtype dt, double tol_rel, double scale)
{
    double eps = gt_eps(dt), worst = 0;
    size_t wi = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double lim =
            tol_rel > 0 ? (tol_rel * eps + ldexp(32.0, -24)) * (fabs(want[i]) + scale) : 0.0;
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= lim)) {
            if (!bad || d / (lim + 1e-300) > worst) {
                worst = d / (lim + 1e-300);
                wi = i;
            }
            bad++;
        }
    }
    if (bad) {
        fprintf(stderr, "FAIL %s [%s]: %d of %zu elements off; worst [%zu] got %.8g want %.8g\n",
                what, flk_dtype_name(dt), bad, n, wi, got[wi], want[wi]);
        fl_check_failures++;
        return 0;
    }
    return 1;
}

#endif
