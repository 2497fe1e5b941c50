/* pinned.c — pinned host memory through a CUDA runtime found at run time (dlopen), so
 * libfastload links no CUDA library and works on machines without one; see pinned.h. */
#include "pinned.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int fl_cuda_load(fl_cuda *c, char *why, size_t why_len)
{
    memset(c, 0, sizeof *c);
    static const char *names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                  "/usr/local/cuda/lib64/libcudart.so"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        if (why)
            snprintf(why, why_len, "libcudart.so could not be loaded: %s", dlerror());
        return -1;
    }
#define SYM(field, name)                                                                       \
    do {                                                                                       \
        *(void **)&c->field = dlsym(h, name);                                                  \
        if (!c->field) {                                                                       \
            if (why)                                                                           \
                snprintf(why, why_len, "libcudart.so lacks %s", name);                        \
            memset(c, 0, sizeof *c);                                                           \
            return -1;                                                                         \
        }                                                                                      \
    } while (0)
    SYM(GetDeviceCount, "cudaGetDeviceCount");
    SYM(SetDevice, "cudaSetDevice");
    SYM(HostAlloc, "cudaHostAlloc");
    SYM(FreeHost, "cudaFreeHost");
    SYM(Malloc, "cudaMalloc");
    SYM(Free, "cudaFree");
    SYM(MemcpyAsync, "cudaMemcpyAsync");
    SYM(StreamCreateWithFlags, "cudaStreamCreateWithFlags");
    SYM(StreamDestroy, "cudaStreamDestroy");
    SYM(EventCreateWithFlags, "cudaEventCreateWithFlags");
    SYM(EventDestroy, "cudaEventDestroy");
    SYM(EventRecord, "cudaEventRecord");
    SYM(EventSynchronize, "cudaEventSynchronize");
    SYM(StreamSynchronize, "cudaStreamSynchronize");
    SYM(GetErrorString, "cudaGetErrorString");
#undef SYM
    c->lib = h; /* deliberately never dlclose'd: see pinned.h */
    return 0;
}

const char *fl_cuda_strerror(const fl_cuda *c, int code)
{
    const char *s = c && c->GetErrorString ? c->GetErrorString(code) : NULL;
    return s ? s : "unknown CUDA error";
}

void *fl_host_alloc(fl_cuda *c, size_t bytes, int *pinned)
{
    *pinned = 0;
    if (bytes == 0)
        bytes = 1;
    if (c && c->lib) {
        void *p = NULL;
        if (c->HostAlloc(&p, bytes, 0) == 0 && p) {
            *pinned = 1;
            memset(p, 0, bytes);
            return p;
        }
    }
    size_t a = 4096;
    size_t rounded = (bytes + a - 1) / a * a;
    void *p = NULL;
    if (posix_memalign(&p, a, rounded) != 0)
        return NULL;
    madvise(p, rounded, MADV_HUGEPAGE); /* a hint: fewer TLB misses on large rings */
    /* Touch it now: the ring is resident for the loader's life anyway (it is the memory bound),
     * no page faults later in the hot path, and tools like valgrind, which cannot see the
     * kernel's io_uring writes, see defined bytes. */
    memset(p, 0, rounded);
    return p;
}

void fl_host_free(fl_cuda *c, void *p, int pinned)
{
    if (!p)
        return;
    if (pinned && c && c->lib)
        c->FreeHost(p);
    else
        free(p);
}
