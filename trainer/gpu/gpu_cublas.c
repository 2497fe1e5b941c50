/* gpu_cublas.c — loads cuBLAS on first use (see gpu_cublas.h). */
#define _GNU_SOURCE
#include "gpu_cublas.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

gpu_cublas_api gpu_cublas;

#define STR_(x)       #x
#define STR(x)        STR_(x)
#define CUBLAS_SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[768];

/* dlopen by name, then beside the libcudart this process uses (a toolkit outside the search
 * path that the executable's RUNPATH named for libcudart). */
static void *open_cublas(char *why, size_t cap)
{
    void *h = dlopen(CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h)
        return h;
    snprintf(why, cap, "%s", dlerror());
    Dl_info info;
    if (dladdr((void *)&cudaGetDeviceCount, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash) {
            char path[4096];
            snprintf(path, sizeof path, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname,
                     CUBLAS_SONAME);
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    return h;
}

static void load_once(void)
{
    char why[512] = "";
    void *h = open_cublas(why, sizeof why);
    if (!h) {
        load_rc = FL_E_CUDA;
        snprintf(load_msg, sizeof load_msg,
                 "cannot load %s (cuBLAS %d, which this trainfast was built with): %s; hint: "
                 "install the CUDA toolkit's cuBLAS or add its lib64 to LD_LIBRARY_PATH "
                 "(trainfast doctor shows what it finds)",
                 CUBLAS_SONAME, CUBLAS_VER_MAJOR, why);
        return;
    }
    static const struct {
        const char *name;
        void *slot;
    } syms[] = {
        {"cublasCreate_v2", &gpu_cublas.create},
        {"cublasDestroy_v2", &gpu_cublas.destroy},
        {"cublasSetStream_v2", &gpu_cublas.set_stream},
        {"cublasSetMathMode", &gpu_cublas.set_math_mode},
        {"cublasGemmEx", &gpu_cublas.gemm_ex},
        {"cublasGetStatusName", &gpu_cublas.status_name},
        {"cublasGetStatusString", &gpu_cublas.status_string},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        void *f = dlsym(h, syms[i].name);
        if (!f) {
            memset(&gpu_cublas, 0, sizeof gpu_cublas);
            load_rc = FL_E_CUDA;
            snprintf(load_msg, sizeof load_msg,
                     "%s has no %s: not the cuBLAS %d this was built with", CUBLAS_SONAME,
                     syms[i].name, CUBLAS_VER_MAJOR);
            return;
        }
        memcpy(syms[i].slot, &f, sizeof f); /* a function pointer, stored as dlsym gives it */
    }
}

int gpu_cublas_load(fl_error *err)
{
    pthread_once(&once, load_once);
    return load_rc ? fl_error_set(err, load_rc, "cuda backend: %s", load_msg) : 0;
}
