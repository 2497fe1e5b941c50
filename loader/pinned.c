/* pinned.c — pinned host memory through a CUDA runtime found at run time (dlopen), so
 * libfastload links no CUDA library and works on machines without one; see pinned.h. */
#include "pinned.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
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

#define HUGE_ALIGN ((size_t)2 << 20)

static size_t anon_span(size_t bytes)
{
    return (bytes + 4095) / 4096 * 4096 + HUGE_ALIGN;
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
    /* Anonymous pages read as zero, and tools like valgrind, which cannot see the kernel's
     * io_uring writes into the ring, count them as defined. Over-allocate by 2 MiB so the
     * buffer can start on a huge-page boundary. */
    size_t span = anon_span(bytes);
    uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)m + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
    size_t head = (size_t)(p - m), used = (bytes + 4095) / 4096 * 4096;
    if (head)
        munmap(m, head);
    if (span - head > used)
        munmap(p + used, span - head - used);
    madvise(p, used, MADV_HUGEPAGE); /* a hint: fewer TLB misses on large rings */
    return p;
}

void fl_host_free(fl_cuda *c, void *p, size_t bytes, int pinned)
{
    if (!p)
        return;
    if (pinned && c && c->lib)
        c->FreeHost(p);
    else
        munmap(p, (bytes ? bytes + 4095 : 4096) / 4096 * 4096);
}
