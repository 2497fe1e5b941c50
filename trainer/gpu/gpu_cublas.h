/* gpu_cublas.h — cuBLAS for the CUDA backend, loaded with dlopen when the backend starts instead
 * of linked: libcublasLt's ~400,000 relocations cost every process that links it ~0.4 s and
 * ~26,000 page faults at start (measured: an empty program linked with -lcublas), so `trainfast
 * --help`, CPU training and every script that calls trainfast paid for a library only GPU
 * training uses. The backend calls cuBLAS only through `gpu_cublas`, after gpu_cublas_load. */
#ifndef TF_GPU_CUBLAS_H
#define TF_GPU_CUBLAS_H

#include <cublas_v2.h>

#include "fl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cuBLAS entry points the backend uses (cublas_v2.h's names; NULL until loaded). */
typedef struct gpu_cublas_api {
    __typeof__(&cublasCreate_v2) create;
    __typeof__(&cublasDestroy_v2) destroy;
    __typeof__(&cublasSetStream_v2) set_stream;
    __typeof__(&cublasSetMathMode) set_math_mode;
    __typeof__(&cublasGemmEx) gemm_ex;
    __typeof__(&cublasGetStatusName) status_name;
    __typeof__(&cublasGetStatusString) status_string;
} gpu_cublas_api;

extern gpu_cublas_api gpu_cublas;

/* Load libcublas.so.<the major version built against> once (any thread; later calls return the
 * first call's result): by the dynamic linker's search path, then from the directory libcudart
 * was loaded from. Returns 0, or FL_E_CUDA naming the library, dlerror's text and a hint. */
int gpu_cublas_load(fl_error *err);

#ifdef __cplusplus
}
#endif
#endif
