/* gpu_test.h — helpers shared by the GPU tests: skip (exit 77) without a GPU, CUDA check macro with
 * file:line, device upload/download of fp32 data stored as fp32/fp16/bf16, precision-scaled
 * comparison against a CPU reference, and a small deterministic RNG. Header-only (static). */
#ifndef FL_GPU_TEST_H
#define FL_GPU_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fl_kernels.h"
#include "kernels_ref.h"

static int gt_failures;

#define GT_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                   \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define GT_ASSERT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);                                  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            gt_failures++;                                                                         \
        }                                                                                          \
    } while (0)

/* Exit 77 with a clear line when no usable GPU is present. */
static inline void gt_require_gpu(const char *test) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP %s: no GPU (%s)\n", test,
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0 devices");
        exit(77);
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        printf("%s: on %s (cc %d.%d)\n", test, prop.name, prop.major, prop.minor);
}

static uint64_t gt_rng_state = 0x1234567ull;
static inline double gt_uniform(void) { /* [0, 1) */
    gt_rng_state = gt_rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(gt_rng_state >> 11) * (1.0 / 9007199254740992.0);
}
static inline float gt_randn(void) {
    double u1 = gt_uniform() + 1e-12, u2 = gt_uniform();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static inline float *gt_randn_array(size_t n, float scale, float offset) {
    float *x = (float *)malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++) x[i] = offset + scale * gt_randn();
    return x;
}

/* Device copy of n floats stored as dt (rounding happens here; round the host array with
 * flk_ref_round first to give the reference the same inputs). */
static inline void *gt_upload(const float *x, size_t n, flk_dtype dt) {
    size_t bytes = n * flk_dtype_size(dt) + 16;
    void *h = malloc(bytes), *d = NULL;
    flk_ref_pack(x, h, dt, n);
    GT_CUDA(cudaMalloc(&d, bytes));
    GT_CUDA(cudaMemcpy(d, h, n * flk_dtype_size(dt), cudaMemcpyHostToDevice));
    free(h);
    return d;
}
static inline void *gt_alloc(size_t bytes) {
    void *d = NULL;
    GT_CUDA(cudaMalloc(&d, bytes + 16));
    GT_CUDA(cudaMemset(d, 0, bytes + 16));
    return d;
}
static inline float *gt_download(const void *d, size_t n, flk_dtype dt) {
    GT_CUDA(cudaDeviceSynchronize());
    size_t bytes = n * flk_dtype_size(dt);
    void *h = malloc(bytes + 16);
    float *x = (float *)malloc(n * sizeof(float) + 16);
    GT_CUDA(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    flk_ref_unpack(h, dt, x, n);
    free(h);
    return x;
}

/* |got − want| ≤ (tol_rel · eps(dt) + 32 · 2^-24) · (|want| + scale) for all i (the second term is
 * the fp32 arithmetic every kernel does whatever it stores; tol_rel 0 demands exact equality);
 * reports the worst element. `scale` is the typical magnitude of the data (slack near 0). */
static inline int gt_close(const char *what, const float *got, const float *want, size_t n, flk_dtype dt,
                    double tol_rel, double scale) {
    double eps = flk_ref_eps(dt), worst = 0;
    size_t wi = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double lim = tol_rel > 0 ? (tol_rel * eps + ldexp(32.0, -24)) * (fabs(want[i]) + scale) : 0.0;
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
        gt_failures++;
        return 0;
    }
    return 1;
}

#endif
