/* cpu_pool.h — a tiny fixed-size thread pool for the CPU backend: run fn(arg, tid, nthreads) on
 * every thread (the caller is thread 0) and wait. Work is always split by a static partition of the
 * thread id, so results are bit-identical from run to run for a given thread count. The pool also
 * owns per-thread scratch buffers that grow on demand and are reused (no allocation per step). */
#ifndef TF_CPU_POOL_H
#define TF_CPU_POOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CPU_POOL_SLOTS 4

typedef struct cpu_pool cpu_pool;

typedef void (*cpu_pool_fn)(void *arg, int tid, int nthreads);

/* Start a pool of `nthreads` (>= 1; 0 = online CPUs). Returns NULL when out of memory. */
cpu_pool *cpu_pool_create(int nthreads);

/* Threads in the pool (>= 1). NULL pool counts as 1. */
int cpu_pool_threads(const cpu_pool *p);

/* Run fn on every thread and wait for all. NULL pool: fn(arg, 0, 1) on the caller. */
void cpu_pool_run(cpu_pool *p, cpu_pool_fn fn, void *arg);

/* Scratch buffer `slot` (< CPU_POOL_SLOTS) of thread `tid` with room for at least n floats, or
 * NULL when out of memory. Contents are undefined. Valid until the next call with a larger n for
 * the same (tid, slot) or cpu_pool_free. NULL pool: a process-wide fallback (single thread). */
float *cpu_pool_scratch(cpu_pool *p, int tid, int slot, size_t n);

void cpu_pool_free(cpu_pool *p);

/* Static partition helper: the range [*lo, *hi) of n items that thread tid of nt owns. */
static inline void cpu_range(long n, int tid, int nt, long *lo, long *hi)
{
    *lo = n * tid / nt;
    *hi = n * (tid + 1) / nt;
}

#ifdef __cplusplus
}
#endif
#endif
