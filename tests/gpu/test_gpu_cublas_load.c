/* test_gpu_cublas_load.c — the CUDA backend's cuBLAS is loaded at run time, not linked
 * (trainer/gpu/gpu_cublas.h): gpu_cublas_load finds the libcublas of the version built against
 * and resolves every entry point the backend calls, a second load returns the first's result,
 * and a status names itself through the loaded library. Needs no GPU (loading cuBLAS does not
 * touch the device), so it runs wherever the CUDA backend is built. */
#include <stdio.h>
#include <string.h>

#include "gpu_cublas.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                  \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    CHECK(gpu_cublas.create == NULL); /* nothing is loaded before the backend asks */
    fl_error err;
    fl_error_clear(&err);
    int rc = gpu_cublas_load(&err);
    if (rc != 0) {
        fprintf(stderr, "gpu_cublas_load: %s\n", err.msg);
        return 1;
    }
    CHECK(gpu_cublas.create && gpu_cublas.destroy && gpu_cublas.set_stream &&
          gpu_cublas.set_math_mode && gpu_cublas.gemm_ex && gpu_cublas.status_name &&
          gpu_cublas.status_string);
    CHECK(gpu_cublas_load(&err) == 0);
    CHECK(strcmp(gpu_cublas.status_name(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS") == 0);
    CHECK(strstr(gpu_cublas.status_name(CUBLAS_STATUS_ALLOC_FAILED), "ALLOC_FAILED") != NULL);
    printf("test_gpu_cublas_load: OK (%s)\n", gpu_cublas.status_string(CUBLAS_STATUS_SUCCESS));
    return 0;
}
