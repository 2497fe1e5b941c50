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
    /* A runtime the process already has (trainfast links libcudart.so.N) comes first: a second
     * one found on the search path, from another CUDA install, would own other streams and
     * events than the caller's. */
    static const char *loaded[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof loaded / sizeof loaded[0] && !h; i++)
        h = dlopen(loaded[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        if (why)
            snprintf(why, why_len, "libcudart.so could not be loaded: %s", dlerror());
        return -1;
    }
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&c->field = dlsym(h, name);                                                      \
        if (!c->field) {                                                                           \
            if (why)                                                                               \
                snprintf(why, why_len, "libcudart.so lacks %s", name);                             \
            memset(c, 0, sizeof *c);                                                               \
            return -1;                                                                             \
        }                                                                                          \
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

static size_t page_round(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

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
    /* Anonymous pages read as zero, and tools like valgrind, which cannot see the kernel's
     * io_uring writes into the ring, count them as defined. No MADV_HUGEPAGE: the ring is written
     * and read sequentially, so huge pages save few TLB misses while faulting them in costs more
     * system time (measured: 0.48 s vs 0.29 s of a 10-epoch JPEG bench). */
    void *p =
        mmap(NULL, page_round(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void fl_host_free(fl_cuda *c, void *p, size_t bytes, int pinned)
{
    if (!p)
        return;
    if (pinned && c && c->lib)
        c->FreeHost(p);
    else
        munmap(p, page_round(bytes ? bytes : 1));
}
