/* pinned.h — the CUDA runtime loaded at run time (dlopen, never linked) for pinned host memory
 * and the optional device copy, with a page-aligned fallback where no CUDA runtime or GPU is
 * present. Internal. */
#ifndef FL_PINNED_H
#define FL_PINNED_H

#include <stddef.h>

typedef struct fl_cuda {
    void *lib; /* dlopen handle; NULL when the runtime could not be loaded */
    int (*GetDeviceCount)(int *);
    int (*SetDevice)(int);
    int (*HostAlloc)(void **, size_t, unsigned);
    int (*FreeHost)(void *);
    int (*Malloc)(void **, size_t);
    int (*Free)(void *);
    int (*MemcpyAsync)(void *, const void *, size_t, int, void *);
    int (*StreamCreateWithFlags)(void **, unsigned);
    int (*StreamDestroy)(void *);
    int (*EventCreateWithFlags)(void **, unsigned);
    int (*EventDestroy)(void *);
    int (*EventRecord)(void *, void *);
    int (*EventSynchronize)(void *);
    int (*StreamSynchronize)(void *);
    const char *(*GetErrorString)(int);
} fl_cuda;

enum { FL_CUDA_MEMCPY_H2D = 1, FL_CUDA_STREAM_NON_BLOCKING = 1, FL_CUDA_EVENT_NO_TIMING = 2 };

/* Load libcudart and resolve the entry points. Returns 0, or -1 with a reason in why (may be
 * NULL, why_len bytes) when it is absent. The library stays loaded for the life of the process:
 * unloading the CUDA runtime after use is not supported by CUDA. */
int fl_cuda_load(fl_cuda *c, char *why, size_t why_len);

/* Error string for a CUDA error code (c loaded). */
const char *fl_cuda_strerror(const fl_cuda *c, int code);

/* Host buffer of `bytes`, zero-filled: cudaHostAlloc when c is loaded and a device is usable
 * (then *pinned = 1; touched at once, as pinning makes it resident anyway), else anonymous
 * memory (*pinned = 0), left untouched: its pages
 * are faulted in by the worker threads that first write them, in parallel, instead of by the
 * thread that creates the loader. NULL on failure. Free with the same `bytes`. */
void *fl_host_alloc(fl_cuda *c, size_t bytes, int *pinned);
void fl_host_free(fl_cuda *c, void *p, size_t bytes, int pinned);

#endif
