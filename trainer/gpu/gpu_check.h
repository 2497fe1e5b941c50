/* gpu_check.h — check macros for CUDA runtime, cuDNN and cuBLAS calls in the GPU backend: on
 * failure they fill the caller's `fl_error *err` with FL_E_CUDA, "file:line: call: error name
 * (text)" and a hint saying what to do, then return the code from the enclosing function (llm.c's
 * cudaCheck, without printing or exiting: the backend is library code). */
#ifndef TF_GPU_CHECK_H
#define TF_GPU_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "fl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

int gpu_fail_cuda(fl_error *err, cudaError_t e, const char *call, const char *file, int line);
int gpu_fail_cudnn(fl_error *err, cudnnStatus_t s, const char *call, const char *file, int line);
int gpu_fail_cublas(fl_error *err, cublasStatus_t s, const char *call, const char *file, int line);

#define GPU_CUDA(call)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return gpu_fail_cuda(err, e_, #call, __FILE__, __LINE__);                              \
    } while (0)

#define GPU_CUDNN(call)                                                                            \
    do {                                                                                           \
        cudnnStatus_t s_ = (call);                                                                 \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                            \
            return gpu_fail_cudnn(err, s_, #call, __FILE__, __LINE__);                             \
    } while (0)

#define GPU_CUBLAS(call)                                                                           \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return gpu_fail_cublas(err, s_, #call, __FILE__, __LINE__);                            \
    } while (0)

/* For kernels/ launchers (they return cudaError_t). */
#define GPU_K(call) GPU_CUDA(call)

/* Propagate an int error code from an internal helper. */
#define GPU_TRY(call)                                                                              \
    do {                                                                                           \
        int r_ = (call);                                                                           \
        if (r_)                                                                                    \
            return r_;                                                                             \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
