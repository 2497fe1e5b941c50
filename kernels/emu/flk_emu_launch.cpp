/* flk_emu_launch.cpp — the launcher of the CUDA host emulation (flk_cuda_host.h): runs a kernel
 * over its grid on the calling host thread, the blocks in order, each CUDA thread of a block as a
 * fiber (its own stack, entered once with setcontext, then switched with the compiler's
 * __builtin_setjmp/__builtin_longjmp: no system call, and under ASan no interceptor, per switch)
 * so __syncthreads and warp exchanges suspend a thread where it stands and resume it once the
 * others have arrived. A fiber whose thread finished runs the next thread given to it.
 * Deterministic: the scheduler resumes ready threads in index order (FLK_EMU_ORDER=reverse: in
 * reverse order, which shows a missing barrier whichever side of it the writer is on). It also
 * checks the rules the hardware leaves undefined: a warp operation whose mask names a lane that
 * exited or does not exist, a calling lane outside its own mask, lanes of one warp meeting with
 * different masks, threads of a block at different __syncthreads, a block that can never finish.
 * A broken rule fails the launch with cudaErrorLaunchFailure and a message naming the block,
 * thread and rule (cudaGetErrorString). Plus the runtime API subset of the shim's C part. */
#include "flk_cuda_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define FLK_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FLK_EMU_ASAN 1
#endif
#endif
#ifdef FLK_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

namespace {

/* Kernels here are small; ASan's redzones make frames several times larger. */
#ifdef FLK_EMU_ASAN
constexpr size_t STACK_BYTES = 256 * 1024;
#else
constexpr size_t STACK_BYTES = 64 * 1024;
#endif

enum state { NEW, READY, WAIT_BLOCK, WAIT_WARP, DONE };

/* __builtin_setjmp's buffer; the jump is in its own function, as GCC asks. Not noreturn and not
 * instrumented: ASan would unpoison the stack being left at every switch (a system call each, and
 * the suspended thread's frames lose their redzones), yet no frame is abandoned here. */
typedef void *jump_buf[5];
__attribute__((noinline, no_sanitize_address)) void jump(jump_buf b) { __builtin_longjmp(b, 1); }

struct fiber {
    char *stack = nullptr; /* STACK_BYTES above one guard page */
    ucontext_t start;      /* entry on this stack (fiber_entry) */
    bool entered = false;  /* fiber_entry runs on it: resume starts its next thread */
    jump_buf resume;
    state st = NEW;
    void *asan_fake = nullptr;
};

struct warp {
    unsigned mask = 0, arrived = 0; /* the lanes of the exchange in progress, and who is there */
    unsigned gen = 0;               /* exchanges completed: the slots alternate so a fast lane
                                       cannot overwrite values a slow lane has still to read */
    uint64_t slot[2][32];
};

struct launcher {
    std::vector<fiber> fibers;
    std::vector<warp> warps;
    int nthreads = 0, cur = -1, done = 0, at_barrier = 0;
    const char *barrier_file = nullptr;
    int barrier_line = 0;
    bool failed = false;
    void (*body)(void *) = nullptr;
    void *ctx = nullptr;
    jump_buf sched;
    const void *sched_stack = nullptr;
    size_t sched_stack_size = 0;
};

thread_local launcher L;
thread_local cudaError_t last_error = cudaSuccess, sticky_error = cudaSuccess;
thread_local char failure[512];

void unpoison_stack(fiber &f)
{
#ifdef FLK_EMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(f.stack, STACK_BYTES);
#else
    (void)f;
#endif
}

/* Fiber → scheduler; returns when the scheduler resumes this fiber (L.cur names its thread). */
void to_scheduler()
{
    fiber &f = L.fibers[L.cur];
#ifdef FLK_EMU_ASAN
    __sanitizer_start_switch_fiber(&f.asan_fake, L.sched_stack, L.sched_stack_size);
#endif
    if (!__builtin_setjmp(f.resume))
        jump(L.sched);
#ifdef FLK_EMU_ASAN
    __sanitizer_finish_switch_fiber(f.asan_fake, &L.sched_stack, &L.sched_stack_size);
#endif
}

/* Record the first broken rule of this launch and leave the block (the scheduler abandons it). */
[[noreturn]] void fail(const char *fmt, int a = 0, int b = 0, int c = 0)
{
    if (!L.failed) {
        char rule[320];
        snprintf(rule, sizeof rule, fmt, a, b, c);
        snprintf(failure, sizeof failure,
                 "emulated kernel launch failed in block (%u,%u,%u), thread %d: %s", blockIdx.x,
                 blockIdx.y, blockIdx.z, L.cur, rule);
    }
    L.failed = true;
    to_scheduler();
    abort(); /* never resumed */
}

/* The threads run on one stack, one after another; L.cur names the current one. */
void fiber_entry()
{
#ifdef FLK_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &L.sched_stack, &L.sched_stack_size);
#endif
    for (;;) {
        L.body(L.ctx);
        L.fibers[L.cur].st = DONE;
        L.done++;
        /* an exited lane can never join a warp exchange its warp is waiting in */
        warp &w = L.warps[L.cur / 32];
        if (w.arrived && (w.mask >> (L.cur % 32) & 1u))
            fail("lane %d exited while its warp waits for it in a warp exchange", L.cur % 32);
        /* exited threads no longer count at a block barrier (sm_70+) */
        if (L.at_barrier && L.at_barrier == L.nthreads - L.done) {
            for (int t = 0; t < L.nthreads; t++)
                if (L.fibers[t].st == WAIT_BLOCK)
                    L.fibers[t].st = READY;
            L.at_barrier = 0;
        }
        to_scheduler();
    }
}

void set_thread_index(int t)
{
    threadIdx.x = (unsigned)t % blockDim.x;
    threadIdx.y = (unsigned)t / blockDim.x % blockDim.y;
    threadIdx.z = (unsigned)t / (blockDim.x * blockDim.y);
}

void ensure_fibers(int n)
{
    long page = sysconf(_SC_PAGESIZE);
    L.fibers.reserve(1024); /* never moved: a ucontext_t points into itself */
    while ((int)L.fibers.size() < n) {
        L.fibers.emplace_back();
        fiber &f = L.fibers.back();
        char *m = (char *)mmap(nullptr, STACK_BYTES + page, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            abort();
        mprotect(m, page,
                 PROT_NONE); /* a stack overflow faults instead of corrupting a neighbour */
        f.stack = m + page;
        getcontext(&f.start);
        f.start.uc_stack.ss_sp = f.stack;
        f.start.uc_stack.ss_size = STACK_BYTES;
        f.start.uc_link = nullptr;
        makecontext(&f.start, fiber_entry, 0);
    }
    if ((int)L.warps.size() < (n + 31) / 32)
        L.warps.resize((n + 31) / 32);
}

/* Scheduler → fiber t, until it finishes or waits. */
void resume(int t)
{
    fiber &f = L.fibers[t];
    L.cur = t;
    set_thread_index(t);
    void *fake = nullptr;
#ifdef FLK_EMU_ASAN
    __sanitizer_start_switch_fiber(&fake, f.stack, STACK_BYTES);
#endif
    if (!__builtin_setjmp(L.sched)) {
        bool enter = !f.entered;
        f.st = READY;
        f.entered = true;
        if (enter)
            setcontext(&f.start);
        jump(f.resume);
    }
#ifdef FLK_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    (void)fake;
}

/* Runs every thread of the current block; false when a rule was broken or it cannot finish. */
bool run_block(bool reverse)
{
    for (int t = 0; t < L.nthreads; t++)
        L.fibers[t].st = NEW;
    for (int w = 0; w < (L.nthreads + 31) / 32; w++)
        L.warps[w].mask = L.warps[w].arrived = 0;
    L.done = L.at_barrier = 0;
    while (L.done < L.nthreads && !L.failed) {
        bool progress = false;
        for (int i = 0; i < L.nthreads && !L.failed; i++) {
            int t = reverse ? L.nthreads - 1 - i : i;
            state s = L.fibers[t].st;
            if (s == NEW || s == READY) {
                resume(t);
                progress = true;
            }
        }
        if (!progress && !L.failed) {
            int wb = 0, ww = 0;
            for (int t = 0; t < L.nthreads; t++) {
                wb += L.fibers[t].st == WAIT_BLOCK;
                ww += L.fibers[t].st == WAIT_WARP;
            }
            snprintf(failure, sizeof failure,
                     "emulated kernel launch failed in block (%u,%u,%u): deadlock, %d threads at "
                     "__syncthreads, %d in a warp exchange, %d exited",
                     blockIdx.x, blockIdx.y, blockIdx.z, wb, ww, L.done);
            L.failed = true;
        }
    }
    if (L.failed)
        for (int t = 0; t < L.nthreads; t++) { /* abandoned mid-kernel: enter afresh next time */
            L.fibers[t].entered = false;
            unpoison_stack(L.fibers[t]);
        }
    return !L.failed;
}

} // namespace

void flk_emu_run(dim3 grid, dim3 block, void (*body)(void *), void *ctx)
{
    unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    if (nt == 0 || nt > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.x > 0x7FFFFFFFu || grid.y > 65535 || grid.z > 65535) {
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    if (sticky_error != cudaSuccess)
        return; /* a failed launch ends the context, as on a GPU */
    if (L.body) {
        fprintf(stderr,
                "flk_emu_run: a kernel launched a kernel (dynamic parallelism is not emulated)\n");
        abort();
    }
    static const bool reverse = [] {
        const char *o = getenv("FLK_EMU_ORDER");
        return o && !strcmp(o, "reverse");
    }();
    L.nthreads = (int)nt;
    L.body = body;
    L.ctx = ctx;
    L.failed = false;
    ensure_fibers(L.nthreads);
    gridDim = grid;
    blockDim = block;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = dim3(x, y, z);
                if (!run_block(reverse)) {
                    sticky_error = last_error = cudaErrorLaunchFailure;
                    L.body = nullptr;
                    return;
                }
            }
    L.body = nullptr;
}

void flk_emu_syncthreads(const char *file, int line)
{
    if (L.at_barrier == 0) {
        L.barrier_file = file;
        L.barrier_line = line;
    } else if (L.barrier_line != line || strcmp(L.barrier_file, file) != 0) {
        fail("divergent __syncthreads: this thread is at line %d, others wait at line %d", line,
             L.barrier_line);
    }
    L.fibers[L.cur].st = WAIT_BLOCK;
    if (++L.at_barrier == L.nthreads - L.done) {
        for (int t = 0; t < L.nthreads; t++)
            if (L.fibers[t].st == WAIT_BLOCK)
                L.fibers[t].st = READY;
        L.at_barrier = 0;
    }
    to_scheduler();
}

int flk_emu_lane(void) { return L.cur % 32; }

const uint64_t *flk_emu_warp_exchange(unsigned mask, uint64_t v)
{
    int lane = L.cur % 32, base = L.cur - lane;
    int lanes = L.nthreads - base < 32 ? L.nthreads - base : 32;
    unsigned exists = lanes == 32 ? 0xFFFFFFFFu : (1u << lanes) - 1;
    warp &w = L.warps[L.cur / 32];
    if (!(mask >> lane & 1u))
        fail("lane %d calls a warp operation with a mask (0x%x) that leaves it out", lane,
             (int)mask);
    if (mask & ~exists)
        fail("warp mask 0x%x names lanes beyond the block's %d threads", (int)mask, L.nthreads);
    for (int l = 0; l < 32; l++)
        if ((mask >> l & 1u) && L.fibers[base + l].st == DONE)
            fail("warp mask 0x%x names lane %d, which has exited", (int)mask, l);
    if (w.arrived == 0)
        w.mask = mask;
    else if (w.mask != mask)
        fail("lanes of one warp meet with different masks (0x%x and 0x%x)", (int)mask, (int)w.mask);
    uint64_t *slot = w.slot[w.gen & 1];
    slot[lane] = v;
    w.arrived |= 1u << lane;
    L.fibers[L.cur].st = WAIT_WARP;
    if (w.arrived == mask) {
        for (int l = 0; l < 32; l++)
            if (mask >> l & 1u)
                L.fibers[base + l].st = READY;
        w.arrived = 0;
        w.gen++;
    }
    to_scheduler();
    return slot;
}

/* ---- runtime API --------------------------------------------------------------------------------
 */

struct CUevent_st {
    double t_ms;
};

extern "C" {

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    if (bytes)
        memmove(dst, src, bytes);
    return sticky_error;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
    if (bytes)
        memset(p, value, bytes);
    return sticky_error;
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream)
{
    return cudaMemset(p, value, bytes);
}
cudaError_t cudaDeviceSynchronize(void) { return sticky_error; }
cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return sticky_error; }
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = sticky_error;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }
const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorLaunchFailure: return failure[0] ? failure : "unspecified launch failure";
    }
    return "unknown error";
}
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (device != 0)
        return cudaErrorInvalidValue;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "host emulation (kernels/emu)");
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = (cudaEvent_t)calloc(1, sizeof(CUevent_st));
    return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->t_ms = ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return sticky_error; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    *ms = (float)(end->t_ms - start->t_ms);
    return cudaSuccess;
}

} /* extern "C" */
